"""The checklist an adapter is judged on: the items of `contract.adapter`, each with the one
judge its module registered on it (`findings.judges(ITEM)`), and `judge`, which runs them all on
one scenario's evidence."""

from __future__ import annotations

from ..contract import adapter
from ..contract.kinds import ChecklistItem, Half
from ..model.matrix import Outcome
from . import generation_checks, overlap, refresh_checks, rollouts
from .deployment_routes import not_judged
from .evidence import Evidence, not_staged
from .findings import JUDGES, Finding, Judge
from .generation_routes import not_staged_route

JUDGE_MODULES = (rollouts, generation_checks, refresh_checks, overlap)
"""The modules whose judges register themselves on their items as they are imported."""


def _judges() -> dict[str, Judge]:
    unjudged = [found.id for found in adapter.ITEMS if found.id not in JUDGES]
    if unjudged:
        raise LookupError(f"checklist items with no judge: {', '.join(unjudged)}")
    return {found.id: JUDGES[found.id] for found in adapter.ITEMS}


CHECKS: dict[str, Judge] = _judges()
"""Item id -> its judge, in the checklist's order."""

GENERATION_ITEMS = frozenset(found.id for found in adapter.ITEMS if found.half is Half.GENERATION)
"""The items about rollouts; the others are about the policy refresh."""


def half_of(check_id: str) -> Half:
    return adapter.BY_ID[check_id].half


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
    for item in adapter.ITEMS:
        if item.half not in evidence.implements:
            findings.append(
                Finding(
                    item.id,
                    Outcome.NOT_APPLICABLE,
                    "the adapter declares it implements "
                    f"{' and '.join(sorted(evidence.implements))} only, not {item.half}",
                )
            )
            continue
        finding = CHECKS[item.id](evidence)
        findings.append(_staged(item, finding, evidence, gap, mismatch, unserved_route))
    return findings


def _staged(
    item: ChecklistItem,
    finding: Finding,
    evidence: Evidence,
    gap: str | None,
    mismatch: str | None,
    unserved_route: str | None,
) -> Finding:
    """The item's finding, `skipped` where what it rests on was not staged as the client's own
    deployment would stage it."""
    if gap is not None and finding.outcome == Outcome.PASS and item in evidence.scenario.staged_for:
        finding = Finding(item.id, Outcome.SKIPPED, f"not staged: {gap}")
    if mismatch is not None and finding.outcome == Outcome.FAIL and item.half is Half.REFRESH:
        finding = Finding(item.id, Outcome.SKIPPED, f"not judged: {mismatch}")
    if (
        unserved_route is not None
        and finding.outcome == Outcome.FAIL
        and item.half is Half.GENERATION
    ):
        finding = Finding(item.id, Outcome.SKIPPED, f"not judged: {unserved_route}")
    return finding
