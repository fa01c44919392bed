"""The checklist an adapter is judged on: one function per item, each a pure function of one
scenario's evidence."""

from __future__ import annotations

from collections.abc import Callable

from .judge import (
    Evidence,
    Finding,
    attempt_identity,
    engine_token_ids,
    logprob_alignment,
    single_admission,
    verified_terminal_only,
)
from .overlap import one_policy_samples
from .refresh_checks import (
    complete_iteration,
    discovery_before_control,
    gated_after_failure,
    mutations_to_advertised,
)

CHECKS: dict[str, Callable[[Evidence], Finding]] = {
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


def judge(evidence: Evidence) -> list[Finding]:
    return [check(evidence) for check in CHECKS.values()]
