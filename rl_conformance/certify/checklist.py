"""The checklist an adapter is judged on: one function per item, each a pure function of one
scenario's evidence."""

from __future__ import annotations

from collections.abc import Callable

from .judge import (
    NOT_APPLICABLE,
    Evidence,
    Finding,
    attempt_identity,
    engine_token_ids,
    logprob_alignment,
    single_admission,
    verified_terminal_only,
)
from .overlap import one_policy_samples
from .protocol import GENERATION, REFRESH
from .refresh_checks import (
    complete_iteration,
    discovery_before_control,
    gated_after_failure,
    mutations_to_advertised,
)
from .rollouts import generation_reaches_backend

CHECKS: dict[str, Callable[[Evidence], Finding]] = {
    "adapter.generation_reaches_backend": generation_reaches_backend,
    "adapter.verified_terminal_only": verified_terminal_only,
    "adapter.single_admission": single_admission,
    "adapter.attempt_identity": attempt_identity,
    "adapter.engine_token_ids": engine_token_ids,
    "adapter.logprob_alignment": logprob_alignment,
    "adapter.discovery_before_control": discovery_before_control,
    "adapter.mutations_to_advertised": mutations_to_advertised,
    "adapter.gated_after_failure": gated_after_failure,
    "adapter.complete_iteration": complete_iteration,
    "adapter.one_policy_samples": one_policy_samples,
}


GENERATION_ITEMS = frozenset(
    {
        "adapter.generation_reaches_backend",
        "adapter.verified_terminal_only",
        "adapter.single_admission",
        "adapter.attempt_identity",
        "adapter.engine_token_ids",
        "adapter.logprob_alignment",
        "adapter.one_policy_samples",
    }
)
"""The items about rollouts; the others are about the policy refresh."""


def half_of(check_id: str) -> str:
    return GENERATION if check_id in GENERATION_ITEMS else REFRESH


def judge(evidence: Evidence) -> list[Finding]:
    """Every item, those of a half the adapter does not implement `not-applicable`."""
    return [
        check(evidence)
        if half_of(check_id) in evidence.implements
        else Finding(
            check_id,
            NOT_APPLICABLE,
            f"the adapter declares it implements {' and '.join(sorted(evidence.implements))} "
            f"only, not {half_of(check_id)}",
        )
        for check_id, check in CHECKS.items()
    ]
