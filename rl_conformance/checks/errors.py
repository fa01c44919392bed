"""Error responses: right status, Dynamo's flat `{message, type, code}` body."""

from __future__ import annotations

from typing import Any

from .base import Findings, Violation, check, describe, get_path


@check(
    "errors.status_and_body",
    title="a rejected request gets the expected 4xx/5xx status and a flat error body",
    spec="Request, worker, and update failures have a tested recovery path.",
    section="Integration Checklist",
)
def status_and_body(status: int | None, body: Any, expected_status: int) -> Findings:
    if status != expected_status:
        yield Violation("unexpected HTTP status", "status", expected_status, status)
    if not isinstance(body, dict):
        yield Violation(
            "error body is not a JSON object", "(body)", "{message, type, code}", describe(body)
        )
        return
    message = get_path(body, "message")
    if not isinstance(message, str) or not message:
        yield Violation(
            "error body lacks a message", "message", "non-empty string", describe(message)
        )
    code = get_path(body, "code")
    if code != status:
        yield Violation(
            "error body code differs from the HTTP status", "code", status, describe(code)
        )


@check(
    "errors.refusal_reason",
    title="a request the release refuses is answered 400 with the release's reason",
    spec="Request, worker, and update failures have a tested recovery path.",
    section="Integration Checklist",
)
def refusal_reason(status: int | None, body: Any, reason: str) -> Findings:
    """`reason`: the text the release's frontend refuses with (its message may add where in the
    body, as serde's `at line L column C`)."""
    if status != 400:
        yield Violation(f"not refused ({reason!r} expected)", "status", 400, status)
    message = get_path(body, "message")
    if not isinstance(message, str) or reason not in message:
        yield Violation(
            "the refusal does not give the release's reason", "message", reason, describe(message)
        )
