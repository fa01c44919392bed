"""The runtime admission guard: one call a trainer makes on every sample before training on it.

    from rl_conformance.admission import AdmissionError, admit_sample

    try:
        admit_sample(ids, logprobs, finish_reason, prompt_ids=prompt, prompt_logprobs=plp,
                     model=served_model, expected_model="Qwen/Qwen3-0.6B")
    except AdmissionError as exc:
        drop(sample, reason=str(exc))

It checks what "Preserve Token Authority" asks before admitting a sample: generated token ids
present, selected log probabilities aligned with them one to one, prompt log probabilities
aligned with the prompt (undefined positions kept as None, not dropped), a terminal state the
framework recognises, and the model identity. Standard library only, and no import of the rest
of the harness at call time, so a trainer can call it in its hot loop.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

TERMINAL_FINISH_REASONS = frozenset({"stop", "length"})
"""What the OpenAI-compatible routes report for a completed generation (Dynamo 1.6.1 reports
`eos`, `cancelled` and `abort` as `stop`; a framework that needs to tell them apart must read
`nvext.detailed_finish_reason` where its Dynamo release has it)."""


class AdmissionError(ValueError):
    """The sample must not be admitted; the message names the field, expected and observed."""

    def __init__(self, field: str, expected: object, observed: object) -> None:
        super().__init__(f"{field}: expected {expected}, observed {observed}")
        self.field = field
        self.expected = expected
        self.observed = observed


def admit_sample(
    token_ids: Sequence[int],
    logprobs: Sequence[float | None],
    finish_reason: str | None,
    *,
    prompt_ids: Sequence[int] | None = None,
    prompt_logprobs: Sequence[float | None] | None = None,
    model: str | None = None,
    expected_model: str | None = None,
    terminal: Collection[str] = TERMINAL_FINISH_REASONS,
) -> None:
    """Raise `AdmissionError` unless the sample may be admitted to training."""
    count = len(token_ids)
    if count == 0:
        raise AdmissionError("token_ids", "at least one generated token id", "none")
    if len(logprobs) != count:
        raise AdmissionError(
            "logprobs", f"{count} selected log probabilities (one per token id)", len(logprobs)
        )
    for position in range(count):
        token = token_ids[position]
        if type(token) is not int or token < 0:
            raise AdmissionError(f"token_ids[{position}]", "a non-negative integer", repr(token))
        value = logprobs[position]
        if value is None or value != value or value > 0.0 or value == -math.inf:
            raise AdmissionError(
                f"logprobs[{position}]", "a finite log probability <= 0", repr(value)
            )
    if finish_reason not in terminal:
        raise AdmissionError("finish_reason", f"one of {sorted(terminal)}", repr(finish_reason))
    if prompt_logprobs is not None:
        if prompt_ids is None:
            raise AdmissionError("prompt_ids", "the prompt the prompt_logprobs align with", None)
        if len(prompt_logprobs) != len(prompt_ids):
            raise AdmissionError(
                "prompt_logprobs",
                f"{len(prompt_ids)} entries, one per prompt token (None where undefined)",
                len(prompt_logprobs),
            )
        if prompt_ids and prompt_logprobs[0] is not None:
            raise AdmissionError(
                "prompt_logprobs[0]",
                "None (the first prompt position has no logprob)",
                repr(prompt_logprobs[0]),
            )
    if expected_model is not None and model != expected_model:
        raise AdmissionError("model", repr(expected_model), repr(model))
