"""Schema conformance as checks: one registered check per bundled schema (`schema.<name>`),
one violation per JSON Schema error, named by its JSON path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .base import REGISTRY, Check, CheckResult, CheckSpec, Level, Violation, register
from .schema_registry import fast_accepts, schema_names, validator

_MAX_VIOLATIONS = 20


def schema_check_id(name: str) -> str:
    return f"schema.{name.replace('-', '_')}"


def _violations(name: str) -> Any:
    def find(instance: Any, where: str = "") -> Iterator[Violation]:
        if fast_accepts(name, instance):
            return  # only an instance the fast engine rejects needs the reference's errors
        errors = sorted(validator(name).iter_errors(instance), key=lambda e: list(e.path))
        for error in errors[:_MAX_VIOLATIONS]:
            path = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in error.path)
            field = f"{where}{path}" if where else (path.lstrip(".") or "(root)")
            yield Violation(
                message=f"{field}: {error.message}",
                field=field,
                expected=f"{error.validator}: {error.validator_value!r}"[:240],
                observed=error.instance,
            )
        if len(errors) > _MAX_VIOLATIONS:
            yield Violation(message=f"... and {len(errors) - _MAX_VIOLATIONS} more")

    return find


for _name in schema_names():
    register(
        Check(
            CheckSpec(
                id=schema_check_id(_name),
                title=f"body conforms to schemas/{_name}.json",
                level=Level.MUST,
                spec="Shapes follow Dynamo's wire format (see the schema's descriptions for "
                "sources).",
                section="schemas",
            ),
            _violations(_name),
            family="schema",
        )
    )


def schema_check(name: str, instance: Any, *, where: str = "") -> CheckResult:
    """Validate `instance` against `schemas/<name>.json` (check id `schema.<name>`)."""
    return REGISTRY[schema_check_id(name)](instance, where=where)
