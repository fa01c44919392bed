"""Runs a validated request on one worker and keeps everything the renderers need.

Generation is done in full before the first byte is written.  That costs nothing with a
toy model and lets the fault views work on whole sequences (a reversed logprob array
must be reversed across the whole stream, not inside each one-token chunk).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fake_backends.generation import ChoiceResult, PromptPosition, generate_choice, score_prompt
from fake_backends.openai_requests import GenerationRequest
from fake_backends.state import DeploymentState
from fake_backends.workers import EngineWorker


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


def run_request(
    state: DeploymentState,
    request: GenerationRequest,
    worker: EngineWorker,
    received: Received,
    response_id: str,
) -> EngineRun:
    model = worker.model()
    count = request.n + (1 if state.fault("wrong_choice_count") else 0)
    choices = tuple(
        generate_choice(model, request.prompt_ids, request.params, i) for i in range(count)
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
    return EngineRun(request, worker, choices, scores, received, response_id, int(time.time()))
