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
from array import array
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
    if not _all_token_ids(token_ids):
        position = next(i for i, t in enumerate(token_ids) if type(t) is not int or t < 0)
        raise AdmissionError(
            f"token_ids[{position}]", "a non-negative integer", repr(token_ids[position])
        )
    if not _all_logprobs(logprobs):
        position = next(i for i, v in enumerate(logprobs) if not _one_logprob(v))
        raise AdmissionError(
            f"logprobs[{position}]", "a finite log probability <= 0", repr(logprobs[position])
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


def _all_token_ids(values: Sequence[int]) -> bool:
    """Whole-sequence checks in C, since this guard runs on every sample; the failing position
    is looked for afterwards, on the slow path only. An unsigned 64-bit array takes exactly the
    non-negative integers (and bools, as 0 and 1)."""
    try:
        array("Q", values)
    except (TypeError, OverflowError):
        return False
    return True


def _all_logprobs(values: Sequence[float | None]) -> bool:
    try:
        total = sum(values)  # type: ignore[arg-type]
    except TypeError:  # None or a string somewhere
        return False
    if isinstance(total, bool) or not math.isfinite(total):  # NaN or an infinity anywhere
        return False
    return max(values) <= 0.0  # type: ignore[type-var]


def _one_logprob(value: float | None) -> bool:
    return (
        isinstance(value, float | int)
        and not isinstance(value, bool)
        and value == value
        and -math.inf < value <= 0.0
    )


__all__ = ["TERMINAL_FINISH_REASONS", "AdmissionError", "admit_sample"]
