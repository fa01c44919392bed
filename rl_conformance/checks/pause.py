"""Pause control beyond the happy path: a mode the engine does not have, and pauses and resumes
sent again, or at once.

vLLM's own RL tests (`tests/entrypoints/rl/state_transitions/`) pin what a refresh coordinator
relies on: an invalid pause mode is refused naming it, with the pause state unchanged, and
repeated pause/resume cycles are idempotent. The real Dynamo 1.6.1 Python worker refuses an
unknown mode with HTTP 200 `{"status": "error", "message": "Invalid mode 'drain'; expected
keep|wait|abort"}` and answers a second pause and a resume of a running worker `ok`
(`fixtures/dynamo-1.6.1/vllm-cpu/pause_invalid_mode.json`, `pause_while_paused.json`,
`resume_while_not_paused.json`); the native sidecar refuses a second pause cleanly ("already
unregistered"). Upstream bug threads show what goes wrong instead: a pause that never returns
(FastDeploy #7825), a second pause stranding the first caller. The Python worker also refuses a
weight update while it is not paused ("Worker must be paused via pause_generation() before
updating weights", `flow_02_update_unpaused.json`); any clean refusal passes, a 4xx of the
engine's own included (lmdeploy answers 409): the rule is that the update is not applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import contract
from .admin import success_semantics
from .base import MISSING, Findings, Violation, check, describe, get_path


def succeeded(family: str, route: str, status: int | None, body: Any) -> bool:
    """Whether the family's success semantics call the reply a success."""
    return success_semantics(family, route, status, body).passed


def _text(body: Any) -> str:
    message = get_path(body, "message")
    if message is MISSING:
        message = get_path(body, "error", "message")
    if message is MISSING:
        message = get_path(body, "detail")
    return body if isinstance(body, str) else ("" if message is MISSING else str(message))


def _not_refused(
    family: str, route: str, status: int | None, body: Any, call: str, accepted: str
) -> Violation | None:
    """Why a call that must be refused was not: no clean refusal (no answer, or a 5xx), or the
    family's success semantics call the reply a success (`accepted` says what that means)."""
    if status is None or status >= 500:
        return Violation(
            f"{call} was not refused cleanly (HTTP {status})",
            "status",
            "200 with an error body, or 4xx",
            status,
        )
    if succeeded(family, route, status, body):
        return Violation(accepted, "status", "a refusal", describe(body))
    return None


@check(contract.admin.INVALID_PAUSE_MODE)
def invalid_mode_refused(
    family: str, route: str, mode: str, status: int | None, body: Any, still_serving: bool
) -> Findings:
    not_refused = _not_refused(
        family,
        route,
        status,
        body,
        f"{route} with mode {mode!r}",
        f"{route} accepted mode {mode!r}, which no engine has",
    )
    if not_refused is not None:
        yield not_refused
    elif mode not in _text(body) and "mode" not in _text(body):
        yield Violation(
            f"{route} refused mode {mode!r} without naming it or the field",
            "message",
            f"a message naming {mode!r} or `mode`",
            _text(body) or describe(body),
        )
    if not still_serving:
        yield Violation(
            f"{route} refused mode {mode!r}, yet the worker stopped serving: a generation sent "
            "after it was held until the worker was resumed",
            "pause state",
            "unchanged (not paused)",
            "paused",
        )


@dataclass(frozen=True)
class Answer:
    """One pause or resume call of a cycle and how it was answered."""

    what: str
    status: int | None
    body: Any
    error: str | None
    must_succeed: bool
    """The first pause and the last resume must succeed; a repeated or concurrent call may
    instead be refused cleanly."""
    succeeded: bool


@check(contract.admin.PAUSE_CYCLES)
def pause_cycle_answered(
    answers: Sequence[Answer], served_after: bool, counted: str | None = None
) -> Findings:
    """`counted`, when given: how a generation sent after two pauses and one resume stayed held
    until a second resume (a pause counted per caller: every pause needs its own resume). A
    pause of a paused worker changes nothing upstream: vLLM and SGLang set one paused flag, and
    one resume clears it."""
    yield from answer_findings(answers)
    if counted is not None:
        yield Violation(
            f"after two pauses and one resume, the worker still held generation: {counted}",
            "resume_generation",
            "generation served after the first resume",
            "held until a second resume",
        )
    if not served_after:
        yield Violation(
            "after the cycle ended with a resume, the worker did not serve a generation",
            "generation",
            "served",
            "not served",
        )


def answer_findings(answers: Sequence[Answer]) -> Findings:
    """Each call that was not answered, failed with a 5xx, or did not succeed when it had to."""
    for answer in answers:
        if answer.status is None:
            yield Violation(
                f"{answer.what} was not answered: {answer.error or 'no response'}",
                "status",
                "an answer within the bound",
                answer.error or "none",
            )
        elif answer.status >= 500:
            yield Violation(
                f"{answer.what} failed with HTTP {answer.status}: {_text(answer.body)}",
                "status",
                "success, or a clean refusal (200 with an error body, or 4xx)",
                answer.status,
            )
        elif answer.must_succeed and not answer.succeeded:
            yield Violation(
                f"{answer.what} did not succeed: {_text(answer.body) or describe(answer.body)}",
                "status",
                "success",
                describe(answer.body),
            )


@check(contract.admin.UNPAUSED_UPDATE_REFUSED)
def unpaused_update_refused(
    family: str, route: str, status: int | None, body: Any, reported_after: Any, sent: Any
) -> Findings:
    not_refused = _not_refused(
        family,
        route,
        status,
        body,
        f"{route} on a running worker",
        f"{route} was applied to a worker that was not paused",
    )
    if not_refused is not None:
        yield not_refused
    if reported_after == sent:
        yield Violation(
            f"after the refused {route}, the worker reports the version it carried ({sent!r})",
            "weight version",
            "the version held before",
            reported_after,
        )
