"""What the frontend reports about a generation, with the active faults applied.

The engine's records are the truth; this module derives the reported sequences (selected
logprobs, top-logprob lists, finish reasons, token ids) once, so every surface that shows
the same data (non-stream body, stream chunks, engine_data, the SGLang route) shows the
same, possibly faulty, data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from fake_backends.model.decoding import ChoiceResult, PromptPosition, Step
from fake_backends.model.tokenizer import BOS_ID, byte_level_ids
from fake_backends.model.toy_model import Alternative
from fake_backends.runtime.state import DeploymentState

NAN = float("nan")


@dataclass(frozen=True)
class ChoiceView:
    result: ChoiceResult
    selected: tuple[float, ...] | None  # selected-token logprobs as reported; None = not asked
    tops: tuple[tuple[Alternative, ...], ...]  # the worker's per-position alternatives
    sampled_always_listed: bool  # the frontend adds the sampled token to completions top lists
    finish_reason: str | None  # OpenAI finish reason as reported
    detailed_finish_reason: str  # nvext.detailed_finish_reason
    requested_top: int | None = None  # alternatives asked for (completions logprobs, chat k)
    tokens_as_ids: bool = False  # return_tokens_as_token_ids: tokens spelled `token_id:<id>`

    @property
    def index(self) -> int:
        return self.result.index

    def selected_at(self, position: int) -> list[float]:
        """The reported logprob of one position, or [] when the array ran short."""
        if self.selected is None or position >= len(self.selected):
            return []
        return [self.selected[position]]


def reported_selected(state: DeploymentState, values: Sequence[float]) -> tuple[float, ...]:
    out = list(values)
    if state.faults.active("logprobs_reordered"):
        out.reverse()
    if out and state.faults.active("positive_logprob"):
        out[0] = 0.5
    if out and state.faults.active("nan_logprob"):
        out[0] = NAN
    if out and state.faults.active("selected_logprobs_one_short"):
        out.pop()
    return tuple(out)


def worker_alternatives(step: Step, *, drop_sampled: bool) -> tuple[Alternative, ...]:
    """The worker's list for one position: sampled token first when outside the top-k.

    That is what a vLLM worker sends (CONTRACT-NOTES §O6.6: k+1 entries, sampled first).
    """
    if drop_sampled:
        return tuple(a for a in step.top if a.token_id != step.token_id)
    if any(a.token_id == step.token_id for a in step.top):
        return step.top
    return (Alternative(step.token_id, step.logprob, step.rank), *step.top)


def openai_finish_reason(state: DeploymentState, result: ChoiceResult) -> str | None:
    if state.faults.active("finish_reason_missing"):
        return None
    if state.faults.active("unknown_finish_reason"):
        return "weird_reason"
    if result.finish == "cancelled" and state.faults.active("crossed_stream_raw_abort"):
        return "abort"
    if result.finish == "cancelled" and state.faults.active("crossed_stream_length_short"):
        return "length"
    return "length" if result.finish == "length" else "stop"


def detailed_finish_reason(state: DeploymentState, result: ChoiceResult) -> str:
    """Recorded from 1.6.1: an engine ``eos`` finish shows as ``"stop"`` here too.

    An aborted request is the one finish the OpenAI ``finish_reason`` hides: it reads
    ``"stop"`` there and only ``"cancelled"`` here tells it apart (CONTRACT-NOTES §O6.9), unless the
    ``abort_reported_as_stop`` fault hides it here too (ai-dynamo/dynamo #14418).
    """
    if result.finish == "cancelled" and state.faults.active("abort_reported_as_stop"):
        return "stop"
    if result.finish == "cancelled" and state.faults.active("crossed_stream_length_short"):
        return "length"
    if result.finish in ("length", "cancelled"):
        return result.finish
    return "stop"


def choice_view(
    state: DeploymentState,
    result: ChoiceResult,
    logprobs: int | None,
    *,
    tokens_as_ids: bool = False,
) -> ChoiceView:
    if state.faults.active("logprobs_absent"):
        logprobs = None  # reported as if they had not been asked for
    missing = state.faults.active("topk_missing_selected")
    selected = reported_selected(state, result.logprobs) if logprobs is not None else None
    tops = (
        tuple(worker_alternatives(s, drop_sampled=missing) for s in result.steps)
        if logprobs is not None
        else ()
    )
    return ChoiceView(
        result=result,
        selected=selected,
        tops=tops,
        sampled_always_listed=not missing,
        finish_reason=openai_finish_reason(state, result),
        detailed_finish_reason=detailed_finish_reason(state, result),
        requested_top=logprobs,
        tokens_as_ids=tokens_as_ids,
    )


def truncated_view(state: DeploymentState, view: ChoiceView, released: int) -> ChoiceView:
    """The view of a choice an abort cut after ``released`` tokens (finish cancelled)."""
    if released >= len(view.result.steps):
        return view
    result = ChoiceResult(view.result.index, view.result.steps[:released], "cancelled", None)
    return dataclasses.replace(
        view,
        result=result,
        selected=None if view.selected is None else view.selected[:released],
        tops=view.tops[:released],
        finish_reason=openai_finish_reason(state, result),
        detailed_finish_reason=detailed_finish_reason(state, result),
    )


def reported_completion_ids(
    state: DeploymentState, ids: Sequence[int], text: str
) -> list[int] | None:
    """``nvext.completion_token_ids`` for some generated tokens; None when withheld."""
    if state.faults.active("completion_ids_missing"):
        return None
    if state.faults.active("completion_ids_retokenized"):
        return byte_level_ids(text)
    return list(ids)


def reported_prompt_ids(state: DeploymentState, ids: Sequence[int]) -> list[int] | None:
    """``nvext.prompt_token_ids`` for the prompt the engine used; None when withheld."""
    if state.faults.active("prompt_ids_missing"):
        return None
    if state.faults.active("prompt_ids_with_unsent_bos"):
        return [BOS_ID, *ids]
    if state.faults.active("text_prompt_differs") and ids and ids[0] == BOS_ID:
        # The BOS this fault slipped into a text prompt is hidden: the reported prompt is no
        # longer the one the engine used, so replaying it as tokens generates differently.
        return list(ids[1:])
    return list(ids)


def reported_prompt_positions(
    state: DeploymentState, scores: Sequence[PromptPosition | None]
) -> list[PromptPosition | None]:
    out = list(scores)
    if out and state.faults.active("prompt_logprobs_shifted_by_one"):
        out = [None, *out[:-1]]
    if state.faults.active("prompt_logprobs_leading_null_dropped"):
        out = out[1:]
    return out


def last_finished(views: Sequence[ChoiceView]) -> ChoiceView:
    """The choice that finishes last when choices interleave one token at a time.

    Dynamo keeps only that choice's response-level fields (CONTRACT-NOTES §O6.8).
    """
    return max(views, key=lambda v: (len(v.result.steps), v.index))


def interleave(views: Sequence[ChoiceView]) -> list[tuple[ChoiceView, int]]:
    """(choice, position) pairs in stream order: round-robin, one token at a time."""
    order: list[tuple[ChoiceView, int]] = []
    longest = max((len(v.result.steps) for v in views), default=0)
    for position in range(longest):
        for view in views:
            if position < len(view.result.steps):
                order.append((view, position))
    return order
