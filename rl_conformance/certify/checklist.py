"""The checklist an adapter is judged on: one function per item, each a pure function of one
scenario's evidence."""

from __future__ import annotations

from collections.abc import Callable

from .deployment_routes import not_judged
from .generation_routes import not_staged_route
from .judge import (
    FAIL,
    NOT_APPLICABLE,
    PASS,
    SKIPPED,
    Evidence,
    Finding,
    attempt_identity,
    engine_token_ids,
    logprob_alignment,
    not_staged,
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
    """Every item, those of a half the adapter does not implement `not-applicable`; those the
    scenario's event exists to test `skipped` where they passed without the event having
    happened; and a refresh item the client failed only on a deployment other than its own
    (an engine route the staged deployment does not serve) `skipped`, naming the route and the
    option that describes the client's deployment; likewise a generation item where the client
    generates through a route the fleet does not serve and a deployment serves when told to."""
    gap = not_staged(evidence)
    mismatch = not_judged(evidence)
    unserved_route = not_staged_route(evidence)
    findings = []
    for check_id, check in CHECKS.items():
        if half_of(check_id) not in evidence.implements:
            findings.append(
                Finding(
                    check_id,
                    NOT_APPLICABLE,
                    "the adapter declares it implements "
                    f"{' and '.join(sorted(evidence.implements))} only, not {half_of(check_id)}",
                )
            )
            continue
        finding = check(evidence)
        if gap is not None and finding.outcome == PASS and check_id in evidence.scenario.staged_for:
            finding = Finding(check_id, SKIPPED, f"not staged: {gap}")
        if mismatch is not None and finding.outcome == FAIL and half_of(check_id) == REFRESH:
            finding = Finding(check_id, SKIPPED, f"not judged: {mismatch}")
        if (
            unserved_route is not None
            and finding.outcome == FAIL
            and half_of(check_id) == GENERATION
        ):
            finding = Finding(check_id, SKIPPED, f"not judged: {unserved_route}")
        findings.append(finding)
    return findings
