"""`refresh.served_policy_verified`: the served probe agrees with the checkpoint sent at the
serving precision (a tolerance that scales with the dtype and the value's magnitude), up to the
reference's first near-tie and no further; a failure says which known checkpoint the probe
agrees with, if any; and two checkpoints are told apart only beyond both tolerances."""

from __future__ import annotations

from dataclasses import replace

from rl_conformance.checks.served_policy import (
    PolicyReference,
    Tolerance,
    as_seen,
    decisive,
    distinguishable,
    served_policy,
    serving_tolerance,
)

REFERENCE = PolicyReference(
    checkpoint="/checkpoints/b",
    prompt=(3, 4, 5, 6),
    completion_ids=(10, 11, 12, 13),
    completion_logprobs=(-1.0, -0.5, -2.0, -0.1),
    margins=(0.9, 0.005, 0.7, 0.7),
    prompt_logprobs=(None, -3.0, -4.5, -14.52),
)
PREVIOUS = PolicyReference(
    checkpoint="/checkpoints/a",
    prompt=(3, 4, 5, 6),
    completion_ids=(20, 21, 22, 23),
    completion_logprobs=(-0.3, -0.4, -0.2, -0.6),
    margins=(1.5, 1.5, 1.5, 1.5),
    prompt_logprobs=(None, -7.5, -1.0, -9.0),
)
IDS = [10, 11, 12, 13]
SELECTED = [-1.0, -0.5, -2.0, -0.1]
PROMPT = [None, -3.0, -4.5, -14.52]


def test_agreement_within_the_tolerance_passes() -> None:
    nudged = [value + 0.04 for value in SELECTED]
    assert served_policy(IDS, nudged, [None, -3.04, -4.46, -14.5], REFERENCE).passed


def test_bfloat16_serving_of_a_far_tail_token_passes() -> None:
    """vLLM 0.31 serving a bfloat16 checkpoint moved a prompt token's -14.52 (the float32
    reference) to -14.72: a relative error of half precision, not other weights."""
    assert served_policy(IDS, SELECTED, [None, -3.0, -4.5, -14.72], REFERENCE).passed


def test_the_tolerance_scales_with_the_magnitude() -> None:
    tolerance = serving_tolerance("float32")
    assert tolerance.at(-0.2) == tolerance.at(-1.0) == 0.125
    assert tolerance.at(-14.52) == 0.125 * 14.52


def test_no_checkpoint_dtype_is_held_finer_than_bfloat16() -> None:
    """Engines serve a float32 checkpoint in half precision unless told otherwise."""
    bf16 = serving_tolerance("bfloat16")
    for dtype in ("float32", "float16", "an-unknown-dtype"):
        assert serving_tolerance(dtype).at(-3.0) == bf16.at(-3.0)
    assert "16 x the machine epsilon of bfloat16" in serving_tolerance("float32").stated


def test_a_prompt_logprob_off_by_more_than_the_tolerance_fails() -> None:
    result = served_policy(IDS, SELECTED, [None, -3.0, -3.9, -14.52], REFERENCE)
    assert not result.passed
    assert result.violations[0].field == "prompt_logprobs[2]"
    assert "per nat of the position's largest logit" in result.violations[0].message


def test_a_selected_logprob_off_fails_even_with_the_same_ids() -> None:
    result = served_policy(IDS, [-1.5, -0.5, -2.0, -0.1], PROMPT, REFERENCE)
    assert not result.passed
    assert "token_logprobs[0]" in result.violations[0].field


def test_divergence_after_a_near_tie_is_not_judged() -> None:
    """Token 1 leads by 0.005 nats: two faithful implementations may pick either, and what
    follows depends on the pick."""
    assert served_policy([10, 11, 99, 98], SELECTED, PROMPT, REFERENCE).passed


def test_another_greedy_token_before_any_near_tie_fails() -> None:
    result = served_policy([77, 11, 12, 13], SELECTED, PROMPT, REFERENCE)
    assert not result.passed
    assert result.violations[0].field == "completion_token_ids[0]"


def test_fewer_tokens_than_asked_fail() -> None:
    assert not served_policy([10], SELECTED, PROMPT, REFERENCE).passed


def test_absent_logprobs_leave_the_ids_to_decide() -> None:
    assert served_policy(IDS, None, None, REFERENCE).passed
    assert not served_policy([12, 11, 12, 13], None, None, REFERENCE).passed


def test_a_near_tie_still_bounds_the_served_logprob() -> None:
    """At a near-tie either leading token is faithful, but not any log probability."""
    assert not served_policy(IDS, [-1.0, -3.0, -2.0, -0.1], PROMPT, REFERENCE).passed
    assert served_policy(IDS, [-1.0, -0.56, -2.0, -0.1], PROMPT, REFERENCE).passed


def test_non_finite_values_never_agree() -> None:
    for bad in (float("nan"), float("inf"), float("-inf")):
        assert not served_policy(IDS, [bad, -0.5, -2.0, -0.1], PROMPT, REFERENCE).passed
        assert not served_policy(IDS, SELECTED, [None, bad, -4.5, -14.52], REFERENCE).passed


def test_a_probe_that_is_the_previous_checkpoint_says_the_update_did_not_take() -> None:
    result = served_policy(
        list(PREVIOUS.completion_ids),
        list(PREVIOUS.completion_logprobs),
        list(PREVIOUS.prompt_logprobs),
        REFERENCE,
        [PREVIOUS],
    )
    assert not result.passed
    assert "agrees with /checkpoints/a, a checkpoint sent before" in result.violations[0].message


def test_a_probe_nearer_neither_checkpoint_says_so() -> None:
    """The tied-layout update that keeps the old output head: a mix of the two."""
    mix = [None, -5.2, -2.7, -11.8]
    result = served_policy(IDS, SELECTED, mix, REFERENCE, [PREVIOUS])
    assert not result.passed
    assert "agrees with none of the 2 checkpoints the run knows" in result.violations[0].message


def test_checkpoints_are_told_apart_only_beyond_both_tolerances() -> None:
    assert distinguishable(REFERENCE, PREVIOUS)
    close = replace(
        REFERENCE,
        checkpoint="/checkpoints/b-next-step",
        prompt_logprobs=(None, -3.1, -4.6, -14.0),
        completion_logprobs=(-1.05, -0.5, -2.0, -0.1),
    )
    assert not distinguishable(REFERENCE, close)
    assert not distinguishable(close, REFERENCE)


def test_a_decisive_greedy_step_tells_checkpoints_apart() -> None:
    same_prompt = replace(PREVIOUS, prompt_logprobs=REFERENCE.prompt_logprobs)
    assert distinguishable(REFERENCE, same_prompt)
    tied_first = replace(same_prompt, margins=(0.01, 1.5, 1.5, 1.5))
    assert not distinguishable(REFERENCE, tied_first)


def test_a_fixed_tolerance_is_stated() -> None:
    failed = served_policy(IDS, SELECTED, [None, -3.05, -4.5, -14.52], REFERENCE, tolerance=0.01)
    assert not failed.passed
    assert "tolerance 0.01 nats" in failed.violations[0].message
    assert Tolerance.fixed(0.01).at(-14.0) == 0.01


def test_the_tolerance_follows_the_positions_largest_logit() -> None:
    """A half-precision engine rounds each logit relative to its size: with logits of magnitude
    14 a confident token's log probability moves by 0.17 nats (vLLM 0.31 in bfloat16), which
    its own magnitude (1 nat) would not allow."""
    moved = [-1.0 + 0.17, -0.5, -2.0, -0.1]
    assert not served_policy(IDS, moved, PROMPT, REFERENCE).passed
    scaled = replace(
        REFERENCE, completion_scales=(14.0,) * 4, prompt_scales=(None, 14.0, 14.0, 14.0)
    )
    assert served_policy(IDS, moved, PROMPT, scaled).passed
    assert not served_policy(IDS, [-4.0, -0.5, -2.0, -0.1], PROMPT, scaled).passed


def test_a_cold_start_reference_is_held_to_float32_rounding() -> None:
    """The same kind of deployment, started fresh on the checkpoint, answers as a faithful
    worker does: no half-precision allowance."""
    cold = replace(REFERENCE, same_engine=True)
    assert served_policy(IDS, [-1.005, -0.5, -2.0, -0.1], PROMPT, cold).passed
    failed = served_policy(IDS, [-1.05, -0.5, -2.0, -0.1], PROMPT, cold)
    assert not failed.passed
    assert "the deployment's own answer on a cold start" in failed.violations[0].message


def test_without_prompt_logprobs_only_a_decisive_continuation_judges() -> None:
    """A deployment that returns no prompt log probabilities is judged on the greedy
    continuation alone: where its first step is a near-tie at the serving precision, nothing
    is judged, which the suite reports as unobservable rather than a pass."""
    scaled = replace(
        REFERENCE, completion_scales=(14.0,) * 4, prompt_scales=(None, 14.0, 14.0, 14.0)
    )
    assert decisive(scaled) and decisive(as_seen(scaled, True))
    seen = as_seen(scaled, False)
    assert seen.prompt_logprobs == () and not decisive(seen)
    assert decisive(replace(seen, margins=(4.0, 0.005, 0.7, 0.7)))
    assert decisive(as_seen(REFERENCE, False))  # logits of magnitude 1: a 0.9-nat lead decides
    assert distinguishable(as_seen(PREVIOUS, False), as_seen(REFERENCE, False))
