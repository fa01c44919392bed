"""Terminal reasons held to the sequence they end: a finish reason is a claim about the returned ids
and the request, and a trainer masks and weights samples by it.

- `length`: the choice holds exactly `max_tokens` ids.
- a stop id in the sequence ends it: nothing follows it.
- `stop` where the request set no stop string: the sequence ends with a requested stop id or one
  of the model's EOS ids (real Dynamo 1.6.1 returns the EOS id, counted in usage, with
  `stop_reason` naming it: `toy-worker/completions_eos_extra_fields_all.json`).
- `stop` on a stop id: the sequence ends with the id `nvext.stop_reason` names (vLLM returns a
  matched stop token in the output, and real Dynamo 1.6.1 with vLLM does:
  `fixtures/dynamo-1.6.1/vllm-cpu/completions_stop_token_ids.json`); SGLang behind Dynamo once
  dropped it while ids, logprobs and usage kept agreeing (ai-dynamo/dynamo #14302), which only this
  rule sees.
- `stop` with `ignore_eos` cannot be a natural finish: Dynamo's `ignore_eos` clears stop strings and
  stop ids as well as EOS (`StopConditions::apply_ignore_eos`, unlike vLLM's own `ignore_eos`, which
  ignores EOS only: `fixtures/KNOWN_DIFFERENCES.md`).
- `nvext.detailed_finish_reason`, when requested, agrees with `finish_reason` and is never
  `cancelled` on a natural finish; on a request an abort cut short it is `cancelled`
  (`abort_reported`): Dynamo reports an abort as finish `stop` (#14418), and only this field
  (PR #14525) tells a truncated rollout from a finished one.
- a stream that crossed a control step (a pause, a rename, an update) is held to the same rules
  however it ended (`crossed_terminal_true`): its finish reason is one the framework recognises,
  never the engine's raw `abort` (vLLM's `FinishReason.ABORT`), and `length` still means
  `max_tokens` ids; one a pause cut short says so, as real Dynamo 1.6.1 with vLLM does (`stop`,
  detailed `cancelled`: `vllm-cpu/stream_during_pause_abort_all_selectors.json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import contract
from .base import MISSING, Findings, Violation, check, get_path
from .streaming import COMPLETION_FINISH_REASONS

if TYPE_CHECKING:
    from .stream_fold import StreamFold


@dataclass(frozen=True)
class Asked:
    """What the request asked for that decides how it may end."""

    max_tokens: int
    stop_token_ids: tuple[int, ...] = ()
    stop_strings: tuple[str, ...] = ()
    ignore_eos: bool = False
    eos_token_ids: tuple[int, ...] = ()
    """The model's end-of-sequence ids, when known (`--eos-token-id`, or the model directory a
    launcher served): a stop no requested condition explains must end on one."""


@dataclass(frozen=True)
class Ending:
    """How one choice ended, as returned."""

    finish_reason: Any
    completion_ids: Sequence[int] | None
    stop_reason: Any = MISSING
    detailed_finish_reason: Any = MISSING
    where: str = "choices[0]"


def _counts(asked: Asked, ending: Ending) -> Findings:
    """A length finish holds exactly max_tokens ids (usage and logprobs are held to the ids by
    their own checks: tokens.usage_consistent, logprobs.selected_alignment)."""
    ids = ending.completion_ids
    if ids is None or ending.finish_reason != "length" or len(ids) == asked.max_tokens:
        return
    yield Violation(
        f"{ending.where}: finish_reason length with {len(ids)} ids, max_tokens {asked.max_tokens}",
        f"{ending.where}.completion_token_ids",
        asked.max_tokens,
        len(ids),
    )


def _stop(asked: Asked, ending: Ending) -> Findings:
    ids = list(ending.completion_ids or [])
    # Dynamo's ignore_eos clears every stop condition (`StopConditions::apply_ignore_eos`):
    # a stop id means something only without it.
    stops = set() if asked.ignore_eos else set(asked.stop_token_ids)
    early = next((k for k, token in enumerate(ids[:-1]) if token in stops), None)
    if early is not None and not asked.stop_strings:
        yield Violation(
            f"{ending.where}: stop id {ids[early]} at position {early}, yet the sequence goes on "
            f"to {len(ids)} ids",
            f"{ending.where}.completion_token_ids",
            ids[: early + 1],
            ids,
        )
        return
    if ending.finish_reason != "stop":
        return
    matched = ids[-1] if ids else None
    named = ending.stop_reason
    if isinstance(named, int) and not isinstance(named, bool) and matched != named:
        yield Violation(
            f"{ending.where}: nvext.stop_reason names id {named}, yet the sequence ends with "
            f"{matched}: the matched id is not in the sequence the trainer receives",
            f"{ending.where}.completion_token_ids[-1]",
            named,
            matched,
        )
        return
    if asked.ignore_eos and not asked.stop_strings:
        yield Violation(
            f"{ending.where}: finish_reason stop with ignore_eos, which leaves nothing to stop on",
            f"{ending.where}.finish_reason",
            "length",
            "stop",
        )
        return
    known = set(asked.stop_token_ids) | set(asked.eos_token_ids)
    if (
        asked.eos_token_ids
        and ending.completion_ids is not None  # absent ids are tokens.completion_ids' finding
        and not asked.stop_strings
        and matched not in known
    ):
        yield Violation(
            f"{ending.where}: finish_reason stop, yet the sequence ends with {matched}, neither a "
            f"requested stop id nor one of the model's EOS ids {sorted(asked.eos_token_ids)}: the "
            "matched id is not in the sequence the trainer receives",
            f"{ending.where}.completion_token_ids[-1]",
            sorted(known),
            matched,
        )


def _detailed(ending: Ending) -> Findings:
    detailed = ending.detailed_finish_reason
    if detailed is MISSING or detailed is None:
        return
    if detailed in ("cancelled", "abort"):
        yield Violation(
            f"{ending.where}: nvext.detailed_finish_reason {detailed!r} on a request that ran "
            "to its end",
            f"{ending.where}.nvext.detailed_finish_reason",
            ending.finish_reason,
            detailed,
        )
    elif ending.finish_reason == "length" and detailed != "length":
        yield Violation(
            f"{ending.where}: nvext.detailed_finish_reason {detailed!r} on a length finish",
            f"{ending.where}.nvext.detailed_finish_reason",
            "length",
            detailed,
        )


@check(contract.stream.TERMINAL_REASON_VERIFIED)
def terminal_reason_true(asked: Asked, ending: Ending) -> Findings:
    yield from _counts(asked, ending)
    yield from _stop(asked, ending)
    yield from _detailed(ending)


def ending_from_body(body: Any) -> Ending:
    """The first choice's ending in a unary body (or a stream folded by `aggregate_stream`)."""
    choice = get_path(body, "choices", 0)
    ids = get_path(body, "nvext", "completion_token_ids")
    return Ending(
        finish_reason=get_path(choice, "finish_reason"),
        completion_ids=ids if isinstance(ids, list) else None,
        stop_reason=get_path(body, "nvext", "stop_reason"),
        detailed_finish_reason=get_path(body, "nvext", "detailed_finish_reason"),
    )


def ending_from_fold(fold: StreamFold) -> Ending:
    """Choice 0's ending in a stream folded as it arrived (`stream_fold.StreamFold`): what
    `ending_from_body(aggregate_stream(events))` reads, for a stream of any length (a stream
    that carried no ids has none to judge)."""
    ids = None if fold.ids_error is not None else fold.ids.tolist()
    return Ending(
        finish_reason=fold.finish_reasons.get("0"),
        completion_ids=ids or None,
        stop_reason=fold.nvext.get("stop_reason", MISSING),
        detailed_finish_reason=fold.nvext.get("detailed_finish_reason", MISSING),
    )


@check(
    "stream.crossed_terminal_verified",
    title="a stream that crossed a control step ends with a recognised finish reason, true of "
    "its ids",
    spec="The response has a terminal state recognized by the framework.",
    section="Preserve Token Authority",
)
def crossed_terminal_true(max_tokens: int, ending: Ending) -> Findings:
    """`ending`: a greedy stream asked for `max_tokens` with EOS ignored, open while a control
    step was taken; however the step ended it (ran on, held, aborted), the finish it reports is
    a claim a trainer masks by. A missing terminal is `stream.single_terminal`'s finding, and a
    cut stream's `cancelled` is `abort_reported`'s."""
    reason = ending.finish_reason
    if reason is not None and reason is not MISSING and reason not in COMPLETION_FINISH_REASONS:
        raw = " (the engine's own abort reason, which Dynamo reports as stop)"
        yield Violation(
            f"{ending.where}: finish_reason {reason!r} after a control step: not one the "
            f"framework recognises{raw if reason == 'abort' else ''}",
            f"{ending.where}.finish_reason",
            sorted(COMPLETION_FINISH_REASONS),
            reason,
        )
        return
    yield from _counts(Asked(max_tokens, ignore_eos=True), ending)
    detailed = ending.detailed_finish_reason
    if reason == "length" and detailed not in (MISSING, None, "length"):
        yield Violation(
            f"{ending.where}: nvext.detailed_finish_reason {detailed!r} on a length finish",
            f"{ending.where}.nvext.detailed_finish_reason",
            "length",
            detailed,
        )


@check(
    "refresh.abort_reported",
    title="a request an abort cut short says so in nvext.detailed_finish_reason",
    spec="Admit only a verified terminal result.",
    section="Handle Streaming and Retries",
)
def abort_reported(max_tokens: int, ending: Ending) -> Findings:
    """`ending`: a request asked for `max_tokens` with EOS ignored, across a pause that may abort
    it. Ended short, it was aborted: the one field that says so must (when requested)."""
    detailed = ending.detailed_finish_reason
    ids = ending.completion_ids
    if detailed is MISSING or detailed is None or ids is None or len(ids) >= max_tokens:
        return
    if ending.finish_reason != "stop":
        return  # Dynamo reports an abort as `stop`; a length finish is held by its own rule
    if detailed != "cancelled":
        yield Violation(
            f"{ending.where}: a request an abort ended after {len(ids)} of {max_tokens} ids "
            f"reports detailed_finish_reason {detailed!r}: a trainer cannot tell the truncated "
            "sample from a finished one",
            f"{ending.where}.nvext.detailed_finish_reason",
            "cancelled",
            detailed,
        )
