"""Schema conformance as a check: one violation per JSON Schema error, named by its JSON path."""

from __future__ import annotations

from typing import Any

from ..schema_registry import validator
from .base import CheckResult, CheckSpec, Level, Violation

_MAX_VIOLATIONS = 20


def schema_check(name: str, instance: Any, *, where: str = "") -> CheckResult:
    """Validate `instance` against `schemas/<name>.json`; check id `schema.<name>`."""
    spec = CheckSpec(
        id=f"schema.{name.replace('-', '_')}",
        title=f"body conforms to schemas/{name}.json",
        level=Level.MUST,
        spec="Shapes follow Dynamo's wire format (see the schema's descriptions for sources).",
        section="schemas",
    )
    errors = sorted(validator(name).iter_errors(instance), key=lambda error: list(error.path))
    violations = []
    for error in errors[:_MAX_VIOLATIONS]:
        path = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in error.path)
        field = f"{where}{path}" if where else (path.lstrip(".") or "(root)")
        violations.append(
            Violation(
                message=f"{field}: {error.message}",
                field=field,
                expected=f"{error.validator}: {error.validator_value!r}"[:240],
                observed=error.instance,
            )
        )
    if len(errors) > _MAX_VIOLATIONS:
        violations.append(Violation(message=f"... and {len(errors) - _MAX_VIOLATIONS} more"))
    return CheckResult(spec, tuple(violations))
