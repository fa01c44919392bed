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


WIRE_FORMAT = "(Shapes follow Dynamo's wire format: see the schema's descriptions for sources.)"
COMPLETIONS = (
    "Cross-backend completions: `POST /v1/completions`: Accepts token arrays and supports "
    "selected NVIDIA request-extension fields."
)
CHAT = (
    "Cross-backend chat: `POST /v1/chat/completions`: Uses messages or bypasses frontend "
    "tokenization with `nvext.token_data`."
)
CITED: dict[str, tuple[str, str]] = {
    "admin_reply": (
        "Compare vLLM and SGLang Administration",
        "Success body: Python RL routes commonly return a `status` field; native-sidecar routes "
        "follow vLLM's RL schemas: Built-in update routes commonly return `success` and "
        "`message`; check both HTTP status and body",
    ),
    "chat_completion": ("Choose a Request Interface", CHAT),
    "chat_completion_chunk": ("Choose a Request Interface", CHAT),
    "completion": ("Choose a Request Interface", COMPLETIONS),
    "completion_chunk": ("Choose a Request Interface", COMPLETIONS),
    "error": ("Choose a Request Interface", COMPLETIONS),
    "nvext": ("Choose a Request Interface", COMPLETIONS),
    "discovery_v1": ("Discover Workers Safely", "A protocol version 1 response has this shape."),
    "discovery_error": (
        "Discover Workers Safely",
        "`error`: Probe failure; fail closed when a required worker or route is unavailable",
    ),
    "sglang_generate": (
        "Choose a Request Interface",
        "Native SGLang token streaming: `POST /generate`: Preserves supported SGLang token-input "
        "and streaming response fields.",
    ),
    "docker_deployment": (
        "Integration Checklist",
        "The tested versions, environment, and topology are recorded with the integration.",
    ),
}
"""The spec sentence each schema's shape serves: what a body that breaks it violates. A
streamed chunk's schema cites its reply's; this suite's own documents (`matrix`,
`rl_validation_record`) the checklist's record of what was tested."""
CITED["sglang_generate_chunk"] = CITED["sglang_generate"]
CITED["matrix"] = CITED["rl_validation_record"] = CITED["docker_deployment"]


def _cited(name: str) -> tuple[str, str]:
    """(section, spec text) of schema `name`: its cited sentence, then where its shape is from."""
    section, sentence = CITED.get(name.replace("-", "_"), ("schemas", ""))
    return section, f"{sentence} {WIRE_FORMAT}".strip()


for _name in schema_names():
    register(
        Check(
            CheckSpec(
                id=schema_check_id(_name),
                title=f"body conforms to schemas/{_name}.json",
                level=Level.MUST,
                spec=_cited(_name)[1],
                section=_cited(_name)[0],
            ),
            _violations(_name),
            family="schema",
        )
    )


def schema_check(name: str, instance: Any, *, where: str = "") -> CheckResult:
    """Validate `instance` against `schemas/<name>.json` (check id `schema.<name>`)."""
    return REGISTRY[schema_check_id(name)](instance, where=where)
