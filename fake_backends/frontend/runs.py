"""Runs a validated request on one worker and keeps everything the renderers need.

The toy model computes a whole generation up front (it costs nothing), with the weights
the worker has when it *admits* the request; the control plane then releases the tokens
one at a time (``flow.LiveRequest``), so pauses, aborts, delays and disconnects act on a
real token stream.  Working on whole sequences also lets the fault views act across the
stream (a reversed logprob array must be reversed across the whole stream, not inside
each one-token chunk).  A request that ends early is *truncated* to what was released.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fake_backends.frontend.requests import GenerationRequest
from fake_backends.model.decoding import ChoiceResult, PromptPosition, generate_choice, score_prompt
from fake_backends.runtime.state import DeploymentState
from fake_backends.runtime.weights import as_generated
from fake_backends.runtime.workers import EngineWorker


@dataclass(frozen=True)
class Received:
    """When the frontend received the request (wall clock and monotonic)."""

    epoch_ms: int
    monotonic: float

    @classmethod
    def now(cls) -> Received:
        return cls(int(time.time() * 1000), time.perf_counter())

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.monotonic) * 1000.0


@dataclass(frozen=True)
class EngineRun:
    request: GenerationRequest
    worker: EngineWorker
    choices: tuple[ChoiceResult, ...]
    prompt_scores: tuple[PromptPosition | None, ...] | None  # None: not requested/available
    received: Received
    response_id: str
    created: int
    cached_tokens: int = 0  # prompt tokens the worker's prefix cache already held
    weight_version: Any = None  # the declared version of the weights that generated this
    version_declared: bool = False

    @property
    def total_tokens(self) -> int:
        return sum(len(c.steps) for c in self.choices)


def run_request(
    state: DeploymentState,
    request: GenerationRequest,
    worker: EngineWorker,
    received: Received,
    response_id: str,
    cached_tokens: int = 0,
) -> EngineRun:
    model = worker.model()
    count = request.n + (1 if state.faults.active("wrong_choice_count") else 0)
    choices = tuple(
        _misreported(
            state,
            as_generated(worker, generate_choice(model, request.prompt_ids, request.params, i)),
        )
        for i in range(count)
    )
    scores: tuple[PromptPosition | None, ...] | None = None
    if request.prompt_logprobs is not None and state.personality.prompt_logprobs:
        scores = tuple(
            score_prompt(
                model,
                request.prompt_ids,
                request.prompt_logprobs,
                include_eos=not request.params.ignore_eos,
            )
        )
    return EngineRun(
        request,
        worker,
        choices,
        scores,
        received,
        response_id,
        int(time.time()),
        cached_tokens=cached_tokens,
        weight_version=worker.sample_version()[0],
        version_declared=worker.sample_version()[1],
    )


def _misreported(state: DeploymentState, result: ChoiceResult) -> ChoiceResult:
    """The terminal faults: a matched stop or EOS id, or the token that completed a stop
    string, dropped from the sequence (ids, logprobs and usage still agree), a max_tokens finish
    reported as a stop."""
    if (
        state.faults.active("matched_stop_id_dropped")
        and result.finish in ("stop", "eos")
        and isinstance(result.stop_reason, int)
    ):
        return dataclasses.replace(result, steps=result.steps[:-1])
    if (
        state.faults.active("stop_string_drops_last_id")
        and result.finish == "stop"
        and isinstance(result.stop_reason, str)
        and result.steps
    ):
        *kept, last = result.steps
        if kept:  # the text stays as it was: the dropped token's part joins the one before
            kept[-1] = kept[-1]._replace(text_delta=kept[-1].text_delta + last.text_delta)
        return dataclasses.replace(result, steps=tuple(kept))
    if state.faults.active("length_reported_as_stop") and result.finish == "length":
        return dataclasses.replace(result, finish="stop")
    return result


def truncate_choice(result: ChoiceResult, released: int) -> ChoiceResult:
    """The choice as far as it got before an abort: ``released`` tokens, finish cancelled."""
    if released >= len(result.steps):
        return result
    return ChoiceResult(result.index, result.steps[:released], "cancelled", None)


def truncate_run(run: EngineRun, released: Mapping[int, int]) -> EngineRun:
    """The run with each choice cut to its released tokens (by position in ``choices``)."""
    choices = tuple(truncate_choice(c, released.get(i, 0)) for i, c in enumerate(run.choices))
    return dataclasses.replace(run, choices=choices)
