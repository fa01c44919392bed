"""`refresh.served_policy_verified`: the served probe is held to the checkpoint's own reference,
within the tolerance, up to the reference's first near-tie and no further."""

from __future__ import annotations

from dataclasses import replace

from rl_conformance.checks import control
from rl_conformance.control.policy_reference import PolicyReference

REFERENCE = PolicyReference(
    checkpoint="/checkpoints/b",
    prompt=(3, 4, 5),
    completion_ids=(10, 11, 12, 13),
    completion_logprobs=(-1.0, -0.5, -2.0, -0.1),
    margins=(0.9, 0.005, 0.7, 0.7),
    prompt_logprobs=(None, -3.0, -4.5),
)
IDS = [10, 11, 12, 13]
SELECTED = [-1.0, -0.5, -2.0, -0.1]
PROMPT = [None, -3.0, -4.5]


def test_agreement_within_the_tolerance_passes() -> None:
    nudged = [value + 0.004 for value in SELECTED]
    assert control.served_policy(IDS, nudged, [None, -3.004, -4.496], REFERENCE).passed


def test_a_prompt_logprob_off_by_more_than_the_tolerance_fails() -> None:
    result = control.served_policy(IDS, SELECTED, [None, -3.0, -4.2], REFERENCE)
    assert not result.passed
    assert result.violations[0].field == "prompt_logprobs[2]"


def test_a_selected_logprob_off_fails_even_with_the_same_ids() -> None:
    result = control.served_policy(IDS, [-1.3, -0.5, -2.0, -0.1], PROMPT, REFERENCE)
    assert not result.passed
    assert "token_logprobs[0]" in result.violations[0].field


def test_divergence_after_a_near_tie_is_not_judged() -> None:
    """Token 1 leads by 0.005 nats: two faithful implementations may pick either, and what
    follows depends on the pick."""
    assert control.served_policy([10, 11, 99, 98], SELECTED, PROMPT, REFERENCE).passed


def test_another_greedy_token_before_any_near_tie_fails() -> None:
    result = control.served_policy([77, 11, 12, 13], SELECTED, PROMPT, REFERENCE)
    assert not result.passed
    assert result.violations[0].field == "completion_token_ids[0]"


def test_fewer_tokens_than_asked_fail() -> None:
    assert not control.served_policy([10], SELECTED, PROMPT, REFERENCE).passed


def test_absent_logprobs_leave_the_ids_to_decide() -> None:
    assert control.served_policy(IDS, None, None, REFERENCE).passed
    assert not control.served_policy([12, 11, 12, 13], None, None, REFERENCE).passed


def test_a_near_tie_still_bounds_the_served_logprob() -> None:
    """At a near-tie either leading token is faithful, but not any log probability."""
    assert not control.served_policy(IDS, [-1.0, -3.0, -2.0, -0.1], PROMPT, REFERENCE).passed
    assert control.served_policy(IDS, [-1.0, -0.503, -2.0, -0.1], PROMPT, REFERENCE).passed


def test_nan_is_never_within_the_tolerance() -> None:
    nan = float("nan")
    assert not control.served_policy(IDS, [nan, -0.5, -2.0, -0.1], PROMPT, REFERENCE).passed
    assert not control.served_policy(IDS, SELECTED, [None, nan, -4.5], REFERENCE).passed


def test_the_tolerance_follows_the_checkpoints_dtype_and_is_stated() -> None:
    """SGLang serving a bfloat16 checkpoint differs from the float32 reference by 0.033 nats:
    within bfloat16's tolerance, not float32's; every violation states the one it applied."""
    bf16 = replace(REFERENCE, dtype="bfloat16")
    off = [None, -3.033, -4.467]
    assert control.served_policy(IDS, SELECTED, off, bf16).passed
    failed = control.served_policy(IDS, SELECTED, off, REFERENCE)
    assert not failed.passed
    assert "tolerance 0.01 nats (float32)" in failed.violations[0].message
    far = control.served_policy(IDS, SELECTED, [None, -3.0, -5.5], bf16)
    assert not far.passed
    assert "0.125 nats: 16 x the machine epsilon of bfloat16" in far.violations[0].message
