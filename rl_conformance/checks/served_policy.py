"""The served policy: after an update, a worker's answers to a fixed probe are those of the
checkpoint it was sent, told apart from every other checkpoint the run knows.

A probe is the greedy continuation of a fixed prompt (ids and their log probabilities) and the
log probability of every prompt token given its prefix. The checkpoint's own answers (a
`PolicyReference`, computed from its files in float32 or by a cold start on it) are the
expectation. A served answer agrees with a reference at a position when it lies within that
position's tolerance, which scales with the serving precision and with the value's magnitude:

- precision: a deployment serves in its checkpoint's dtype or coarser, and never finer than
  bfloat16 is assumed (vLLM and SGLang serve a float32 checkpoint in half precision unless told
  otherwise, and GPU fleets serve bfloat16);
- magnitude: a half-precision engine rounds each logit relative to its size, and a log
  probability is a logit less the log of a sum dominated by the largest ones, so the error of any
  log probability at a position scales with the largest logit magnitude there (which the
  reference computes from the checkpoint), or with the value itself where that is not known.

The check then discriminates: the served probe must agree with the checkpoint sent at every
position, and the checkpoints the run knows must be tellable apart at that precision
(`distinguishable`) for the agreement to mean anything, so a served probe that agrees with the
checkpoint sent is nearer it than any other. A probe that agrees with none (an update that kept
part of the old weights: the old output head of a tied layout) or with an earlier checkpoint
fails, naming which.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from .. import contract
from .base import Findings, Violation, check

MACHINE_EPSILON = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}
SERVING_FLOOR = "bfloat16"
"""The finest precision a served log probability is held to, whatever the checkpoint's dtype."""
SAME_ENGINE_TOLERANCE = 0.01
"""Nats: how far a worker's answer may lie from the same deployment's own answer on a cold
start (float32 on both sides agrees to about 1e-5 on CPU)."""
EPSILON_FACTOR = 16
"""A position's tolerance is this many machine epsilons of the serving precision per nat of its
scale (at least one nat). Measured on random-weight checkpoints whose largest logits are 13-15
in magnitude, stored and served in bfloat16 by vLLM 0.31 against float32 references: selected
and prompt log probabilities differ by up to 0.25 nats (about 2.3 epsilons per nat of scale),
where bfloat16 allows 1.7-1.9 nats, while another checkpoint differs by 8-10 nats at some
position. Deeper models accumulate more rounding: the factor leaves room for it."""


@dataclass(frozen=True)
class PolicyReference:
    """What a checkpoint itself gives the probe: greedy continuation ids, their log
    probabilities, each greedy choice's lead over the runner-up (`margins`), and each prompt
    token's log probability given its prefix (None where undefined: the first token)."""

    checkpoint: str
    prompt: tuple[int, ...]
    completion_ids: tuple[int, ...]
    completion_logprobs: tuple[float, ...]
    margins: tuple[float, ...]
    prompt_logprobs: tuple[float | None, ...]
    dtype: str = "float32"
    """The dtype the checkpoint is stored in (its config's `torch_dtype`): a deployment serves
    it in this precision or a coarser one."""
    completion_scales: tuple[float, ...] = ()
    """The largest logit magnitude at each greedy step (empty where not computed)."""
    prompt_scales: tuple[float | None, ...] = ()
    """The largest logit magnitude at each prompt position (None for the first token)."""
    same_engine: bool = False
    """Answered by the same kind of deployment started fresh on the checkpoint (a cold start),
    not computed from its files: a faithful worker answers as it did, up to float32 rounding."""


@dataclass(frozen=True)
class Tolerance:
    """How far a served log probability may lie from a reference one at the serving
    precision: `per_nat` for each nat of the position's scale (the largest logit magnitude
    there when known, else the value's own magnitude; at least one), never less than `floor`."""

    per_nat: float
    floor: float
    stated: str

    def at(self, value: float, scale: float | None = None) -> float:
        return max(self.floor, self.per_nat * max(1.0, abs(value), scale or 0.0))

    @classmethod
    def fixed(cls, nats: float) -> Tolerance:
        return cls(0.0, nats, f"tolerance {nats:g} nats")


def tolerance_for(reference: PolicyReference) -> Tolerance:
    """The tolerance a served answer is held to against `reference`."""
    if reference.same_engine:
        return Tolerance(
            0.0,
            SAME_ENGINE_TOLERANCE,
            f"tolerance {SAME_ENGINE_TOLERANCE:g} nats: the reference is the deployment's own "
            "answer on a cold start",
        )
    return serving_tolerance(reference.dtype)


def serving_tolerance(dtype: str) -> Tolerance:
    """The tolerance for a checkpoint stored in `dtype`: the coarser of its precision and
    `SERVING_FLOOR` (a dtype not listed is held to the floor)."""
    floor = MACHINE_EPSILON[SERVING_FLOOR]
    epsilon = max(MACHINE_EPSILON.get(dtype, floor), floor)
    precision = next(name for name, value in MACHINE_EPSILON.items() if value == epsilon)
    per_nat = EPSILON_FACTOR * epsilon
    return Tolerance(
        per_nat,
        per_nat,
        f"tolerance {per_nat:g} nats per nat of the position's largest logit: "
        f"{EPSILON_FACTOR} x the machine epsilon of {precision}, the finest precision a {dtype} "
        "checkpoint is served in",
    )


@dataclass(frozen=True)
class ServedProbe:
    """What a worker answered the probe: its greedy ids, their log probabilities and the
    prompt tokens' log probabilities (None where the response carries none)."""

    ids: Sequence[int]
    logprobs: Sequence[float] | None
    prompt_logprobs: Sequence[float | None] | None


def disagreement(
    probe: ServedProbe, reference: PolicyReference, tolerance: Tolerance
) -> Violation | None:
    """The first position where `probe` does not agree with `reference` within `tolerance`, as
    a violation naming it; None when they agree. Greedy ids are compared up to the reference's
    first near-tie (a runner-up within twice the tolerance, where two faithful implementations
    may choose differently); there the served log probability must still lie within the
    margin."""
    name = reference.checkpoint
    for index, expected in enumerate(reference.prompt_logprobs):
        if expected is None or probe.prompt_logprobs is None:
            continue
        got = probe.prompt_logprobs[index] if index < len(probe.prompt_logprobs) else None
        if not _within(
            got, expected, tolerance.at(expected, _scale(reference.prompt_scales, index))
        ):
            return Violation(
                f"prompt token {index} has another log probability than {name} gives it",
                f"prompt_logprobs[{index}]",
                round(expected, 5),
                got,
            )
    if len(probe.ids) < len(reference.completion_ids):
        return Violation(
            f"{len(probe.ids)} greedy tokens served where {len(reference.completion_ids)} "
            "were asked",
            "completion_token_ids",
            len(reference.completion_ids),
            len(probe.ids),
        )
    served = probe.logprobs
    for index, expected in enumerate(reference.completion_ids):
        wanted = reference.completion_logprobs[index]
        allowed = tolerance.at(wanted, _scale(reference.completion_scales, index))
        margin = reference.margins[index]
        got = served[index] if served is not None and index < len(served) else None
        field = f"choices[0].logprobs.token_logprobs[{index}]"
        if margin < 2 * allowed:
            if served is not None and not _within(got, wanted, margin + allowed):
                return Violation(
                    f"greedy token {index} has another log probability than {name} gives "
                    "either of its two leading tokens",
                    field,
                    round(wanted, 5),
                    got,
                )
            return None
        if probe.ids[index] != expected:
            return Violation(
                f"greedy token {index} is not the one {name} chooses (its lead there is "
                f"{margin:.3f} nats)",
                f"completion_token_ids[{index}]",
                expected,
                probe.ids[index],
            )
        if served is not None and index < len(served) and not _within(got, wanted, allowed):
            return Violation(
                f"greedy token {index} has another log probability than {name} gives it",
                field,
                round(wanted, 5),
                got,
            )
    return None


def as_seen(reference: PolicyReference, prompt_logprobs: bool) -> PolicyReference:
    """`reference` as far as a served probe can be compared with it: without its prompt log
    probabilities when the deployment returns none."""
    if prompt_logprobs:
        return reference
    return dataclasses.replace(reference, prompt_logprobs=(), prompt_scales=())


def decisive(reference: PolicyReference) -> bool:
    """Whether a served probe is judged at any position at all: a prompt log probability, or
    a first greedy step that is not a near-tie at the serving precision."""
    if any(value is not None for value in reference.prompt_logprobs):
        return True
    if not reference.completion_ids:
        return False
    allowed = tolerance_for(reference).at(
        reference.completion_logprobs[0], _scale(reference.completion_scales, 0)
    )
    return reference.margins[0] >= 2 * allowed


def distinguishable(first: PolicyReference, second: PolicyReference) -> bool:
    """Whether a served probe can agree with at most one of the two references: some prompt
    token whose two log probabilities lie further apart than both tolerances together, or a
    greedy step where they choose different tokens while neither is near a tie."""
    one, two = tolerance_for(first), tolerance_for(second)
    for index, (a, b) in enumerate(
        zip(first.prompt_logprobs, second.prompt_logprobs, strict=False)
    ):
        if a is None or b is None:
            continue
        apart = one.at(a, _scale(first.prompt_scales, index)) + two.at(
            b, _scale(second.prompt_scales, index)
        )
        if abs(a - b) > apart:
            return True
    steps = zip(first.completion_ids, second.completion_ids, strict=False)
    for index, (a_id, b_id) in enumerate(steps):
        a_lp, b_lp = first.completion_logprobs[index], second.completion_logprobs[index]
        a_allowed = one.at(a_lp, _scale(first.completion_scales, index))
        b_allowed = two.at(b_lp, _scale(second.completion_scales, index))
        if first.margins[index] < 2 * a_allowed or second.margins[index] < 2 * b_allowed:
            return False
        if a_id != b_id or abs(a_lp - b_lp) > a_allowed + b_allowed:
            return True
    return False


@check(contract.refresh.SERVED_POLICY_VERIFIED)
def served_policy(
    served_ids: Sequence[int],
    served_logprobs: Sequence[float] | None,
    served_prompt_logprobs: Sequence[float | None] | None,
    reference: PolicyReference,
    others: Sequence[PolicyReference] = (),
    tolerance: float | None = None,
) -> Findings:
    """The served probe agrees with `reference`, the checkpoint sent, at every position
    (`disagreement`), within `tolerance` nats when given, else the reference's own
    (`tolerance_for`), stated in every violation. `others`: the references of the
    other checkpoints the run knows (the one sent before, the other update paths); a violation
    says which of them the served probe agrees with, if any. The suite makes sure beforehand
    that the checkpoint sent is `distinguishable` from each of them."""
    allowed = tolerance_for(reference) if tolerance is None else Tolerance.fixed(tolerance)
    probe = ServedProbe(served_ids, served_logprobs, served_prompt_logprobs)
    found = disagreement(probe, reference, allowed)
    if found is None:
        return
    matching = [
        other.checkpoint
        for other in others
        if disagreement(probe, other, tolerance_for(other)) is None
    ]
    if matching:
        verdict = (
            f"it agrees with {matching[0]}, a checkpoint sent before: the update did not "
            "replace the served weights"
        )
    elif others:
        verdict = (
            f"it agrees with none of the {len(others) + 1} checkpoints the run knows: part of "
            "the served weights is not the checkpoint's"
        )
    else:
        verdict = "the served weights are not that checkpoint"
    yield Violation(
        f"{found.message} ({allowed.stated}): {verdict}",
        found.field,
        found.expected,
        found.observed,
    )


def _scale(scales: Sequence[float | None], index: int) -> float | None:
    return scales[index] if index < len(scales) else None


def _within(got: object, wanted: float, tolerance: float) -> bool:
    """A finite number within `tolerance` of `wanted` (NaN, infinities and non-numbers never
    are)."""
    return (
        isinstance(got, int | float)
        and not isinstance(got, bool)
        and math.isfinite(got)
        and abs(got - wanted) <= tolerance
    )
