"""Streaming terminal states: one terminal per choice, nothing after it, `[DONE]` last."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import contract
from .aggregate import DONE
from .base import MISSING, Findings, Folded, Violation, check, describe, get_path, is_int

if TYPE_CHECKING:
    from .stream_fold import StreamFold

SECTION = "Handle Streaming and Retries"
COMPLETION_FINISH_REASONS = frozenset({"stop", "length", "content_filter"})
CHAT_FINISH_REASONS = COMPLETION_FINISH_REASONS | {"tool_calls", "function_call"}


def _choices(payload: Any) -> list[Any]:
    choices = get_path(payload, "choices")
    return choices if isinstance(choices, list) else []


def _key(choice: Any, position: int) -> str:
    return str(get_path(choice, "index") if get_path(choice, "index") is not MISSING else position)


@check(contract.stream.SINGLE_TERMINAL)
def single_terminal(payloads: list[Any] | StreamFold, expected_choices: int = 1) -> Findings:
    terminals: Counter[str] = Counter()
    if isinstance(payloads, Folded):
        terminals = payloads.terminals
    else:
        for payload in payloads:
            for position, choice in enumerate(_choices(payload)):
                if get_path(choice, "finish_reason") not in (None, MISSING):
                    terminals[_key(choice, position)] += 1
    for index in range(expected_choices):
        count = terminals.get(str(index), 0)
        if count != 1:
            yield Violation(
                f"choice {index} has {count} terminal events",
                f"choices[{index}].finish_reason",
                1,
                count,
            )


@check(contract.stream.NOTHING_AFTER_TERMINAL)
def nothing_after_terminal(payloads: list[Any] | StreamFold) -> Findings:
    if isinstance(payloads, Folded):
        if payloads.after_terminal is not None:
            yield _after_terminal(*payloads.after_terminal)
        return
    finished: set[str] = set()
    for event, payload in enumerate(payloads):
        if payload == DONE:
            continue
        for position, choice in enumerate(_choices(payload)):
            key = _key(choice, position)
            if key in finished:
                yield _after_terminal(event, key, position, choice)
                return
            if get_path(choice, "finish_reason") not in (None, MISSING):
                finished.add(key)


def _after_terminal(event: int, key: str, position: int, choice: Any) -> Violation:
    return Violation(
        f"event {event}: choice {key} continues after its terminal event",
        f"events[{event}].choices[{position}]",
        "no further chunk",
        choice,
    )


@check(contract.stream.DONE_LAST)
def done_last(payloads: list[Any] | StreamFold) -> Findings:
    if isinstance(payloads, Folded):
        count, events = payloads.done, payloads.payloads
        last = payloads.last
    else:
        count, events = sum(1 for payload in payloads if payload == DONE), len(payloads)
        last = payloads[-1] if payloads else MISSING
    if count == 0:
        yield Violation(
            "no data: [DONE] terminator",
            "events[-1]",
            "[DONE]",
            describe(last) if events else "(no events)",
        )
    elif count > 1:
        yield Violation(f"{count} [DONE] terminators", "events", 1, count)
    elif last != DONE:
        yield Violation("events follow data: [DONE]", "events[-1]", "[DONE]", last)


@check(
    "stream.finish_reason_recognised",
    title="finish_reason is one the framework recognises",
    spec="The response has a terminal state recognized by the framework.",
    section="Preserve Token Authority",
)
def finish_reason_recognised(body_or_payloads: Any, chat: bool = False) -> Findings:
    allowed = CHAT_FINISH_REASONS if chat else COMPLETION_FINISH_REASONS
    payloads = body_or_payloads if isinstance(body_or_payloads, list) else [body_or_payloads]
    for event, payload in enumerate(payloads):
        for position, choice in enumerate(_choices(payload)):
            reason = get_path(choice, "finish_reason")
            if reason in (None, MISSING):
                continue
            if reason not in allowed:
                yield Violation(
                    f"unrecognised finish_reason {reason!r}",
                    f"events[{event}].choices[{position}].finish_reason",
                    sorted(allowed),
                    reason,
                )


@check(
    "stream.unary_finish_reason",
    title="a completed unary choice carries a finish_reason",
    spec="The response has a terminal state recognized by the framework.",
    section="Preserve Token Authority",
)
def unary_finish_reason(body: Any) -> Findings:
    for position, choice in enumerate(_choices(body)):
        if get_path(choice, "finish_reason") in (None, MISSING):
            yield Violation(
                f"choices[{position}] has no finish_reason",
                f"choices[{position}].finish_reason",
                "stop | length | ...",
                describe(get_path(choice, "finish_reason")),
            )


@check(contract.stream.TERMINAL_SUCCESS)
def terminal_success(state: str, reason: str) -> Findings:
    if state != "success":
        yield Violation(f"stream ended {state}: {reason}", "stream", "success", state)


@check(
    "stream.no_silent_cancellation",
    title="a generation the client did not cancel is not reported as cancelled behind a 'stop'",
    spec="Admit only a verified terminal result.",
    section=SECTION,
)
def no_silent_cancellation(body_or_payloads: Any) -> Findings:
    """Dynamo maps an engine's cancelled/abort to finish_reason "stop"; only the opt-in
    nvext.detailed_finish_reason tells a truncated rollout from a finished one."""
    payloads = body_or_payloads if isinstance(body_or_payloads, list) else [body_or_payloads]
    for event, payload in enumerate(payloads):
        detailed = get_path(payload, "nvext", "detailed_finish_reason")
        if detailed in ("cancelled", "abort"):
            yield Violation(
                "the engine cancelled a request the client did not cancel; "
                "finish_reason alone would admit it as a completed rollout",
                f"events[{event}].nvext.detailed_finish_reason",
                "eos | length | stop",
                detailed,
            )


@check(
    "stream.stop_reason_placement",
    title="the matched stop is reported as nvext.stop_reason when selected, never in choices[]",
    spec="Use the engine-returned sequence; exact placement depends on the selected interface.",
    section="Know What Returns to the Trainer",
)
def stop_reason_placement(body_or_payloads: Any, stops: Sequence[str], selected: bool) -> Findings:
    """Dynamo's frontend keeps the backend's matched stop out of the OpenAI choices and returns
    it only as `nvext.stop_reason` on request (real 1.6.1: `toy-worker/completions_stop_string.
    json`); a choice-level `stop_reason` is the engine's own server leaking through. When present,
    it names one of the requested stop strings or a stop token id."""
    payloads = body_or_payloads if isinstance(body_or_payloads, list) else [body_or_payloads]
    for event, payload in enumerate(payloads):
        choices = get_path(payload, "choices")
        for index, choice in enumerate(choices if isinstance(choices, list) else []):
            if isinstance(choice, dict) and "stop_reason" in choice:
                yield Violation(
                    "a choice carries stop_reason; Dynamo reports it only as nvext.stop_reason",
                    f"events[{event}].choices[{index}].stop_reason",
                    "(absent)",
                    choice["stop_reason"],
                )
        reported = get_path(payload, "nvext", "stop_reason")
        if reported is MISSING or reported is None:
            continue
        where = f"events[{event}].nvext.stop_reason"
        if not selected:
            yield Violation(
                "nvext.stop_reason returned without the stop_reason selector",
                where,
                "(absent)",
                reported,
            )
        elif not (is_int(reported) or reported in stops):
            yield Violation(
                "nvext.stop_reason names neither a requested stop string nor a token id",
                where,
                list(stops),
                reported,
            )
