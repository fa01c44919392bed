"""No checklist item passes on zero evidence: a client that sends nothing, admits nothing or
refreshes nothing passes nothing, in every scenario, on every fleet, whatever half it declares;
each such item is `skipped` as never exercised, naming what would have exercised it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from rl_conformance.certify import AdapterContext, GenerationGated, Policy, RefreshFailed
from rl_conformance.certify.audit import NOT_CLAIMED, AuditLog, Step
from rl_conformance.certify.checklist import CHECKS, judge
from rl_conformance.certify.evidence import Evidence
from rl_conformance.certify.fleets import FLEETS, SGLANG_FLEET, VLLM_FLEET
from rl_conformance.certify.protocol import GENERATION, REFRESH, RolloutRequest, Sample
from rl_conformance.certify.runner import certify
from rl_conformance.certify.scenarios import SCENARIOS, Generate, GenerateAcross, Refresh
from rl_conformance.contract.adapter import BY_ID as ITEMS

HALVES = (frozenset({GENERATION, REFRESH}), frozenset({GENERATION}), frozenset({REFRESH}))
BEHAVIOURS = {
    "returns": ("returned", "returned"),
    "fails closed": ("gated", "refresh-failed"),
}
"""What a client that does nothing answers: (each rollout, each refresh)."""


def _steps(planned: tuple[Any, ...], implements: frozenset[str], behaviour: str) -> list[Step]:
    """The steps a client that sends nothing is driven through, as the driver records them."""
    rollout, refresh = BEHAVIOURS[behaviour]
    kinds: list[tuple[str, str]] = []
    for step in planned:
        if isinstance(step, Generate):
            kinds.append(("generate", step.slot))
        elif isinstance(step, Refresh):
            kinds.append(("refresh", step.version))
        elif isinstance(step, GenerateAcross):
            kinds += [("generate", step.slot), ("refresh", step.refresh.version)]
    steps = []
    for index, (kind, label) in enumerate(kinds):
        claimed = (GENERATION if kind == "generate" else REFRESH) in implements
        outcome = (rollout if kind == "generate" else refresh) if claimed else NOT_CLAIMED
        steps.append(Step(index, kind, label, float(index), index + 0.5, outcome))
    return steps


@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
@pytest.mark.parametrize("fleet", sorted(FLEETS))
def test_a_client_that_does_nothing_passes_no_item_in_any_scenario(
    fleet: str, behaviour: str
) -> None:
    for scenario, implements in itertools.product(SCENARIOS, HALVES):
        steps = _steps(scenario.steps, implements, behaviour)
        evidence = Evidence(scenario, AuditLog(), steps, [], FLEETS[fleet], implements=implements)
        for finding in judge(evidence):
            assert finding.outcome != "pass", (scenario.name, sorted(implements), finding)
            if finding.outcome == "skipped":
                assert finding.message.startswith("never exercised: "), finding
                assert ITEMS[finding.check_id].exercised_by in finding.message, finding


def test_every_item_names_what_would_exercise_it() -> None:
    assert all(ITEMS[check].exercised_by for check in CHECKS)


class SendsNothing:
    """Generates nothing and refreshes nothing, and says it did."""

    def __init__(self, context: AdapterContext) -> None:
        self.context = context

    def generate(self, request: RolloutRequest) -> Sample | None:
        return None

    def refresh_policy(self, policy: Policy) -> None:
        return None

    def close(self) -> None:
        return None


class FailsClosedSendingNothing(SendsNothing):
    """Fails every refresh before calling anything, and keeps generation gated for good."""

    def generate(self, request: RolloutRequest) -> Sample | None:
        raise GenerationGated("never opened")

    def refresh_policy(self, policy: Policy) -> None:
        raise RefreshFailed("refuses to refresh")


class GeneratesNothing(SendsNothing):
    implements = frozenset({GENERATION})


@pytest.mark.slow
@pytest.mark.parametrize("fleet", [VLLM_FLEET, SGLANG_FLEET], ids=lambda f: f.name)
def test_live_clients_that_do_nothing_pass_nothing(fleet: Any) -> None:
    """Three clients that do nothing, through every scenario of a fleet (about 10 s each on two
    cores): no cell passes, and every cell no scenario exercised says so."""
    adapters = {
        "sends-nothing": SendsNothing,
        "fails-closed-sending-nothing": FailsClosedSendingNothing,
        "generates-nothing": GeneratesNothing,
    }
    matrix, results = certify(adapters, fleet=fleet, jobs=4)
    for result in results:
        assert result.error is None, (result.adapter, result.scenario.name, result.error)
        assert "pass" not in {f.outcome for f in result.findings}, (result.adapter, result.findings)
    for row in matrix.rows:
        for adapter, cell in row.cells.items():
            assert cell.outcome.value != "pass", (row.capability.id, adapter)
            if cell.outcome.value == "skipped":
                assert cell.reason.startswith("never exercised"), (row.capability.id, cell.reason)
    ran = {r.scenario.name for r in results if r.adapter == "generates-nothing" and r.steps}
    assert ran == {s.name for s in SCENARIOS}  # a client that only generates meets every one
