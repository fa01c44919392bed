"""Certification inside a framework's own pytest suite.

    # conftest.py
    pytest_plugins = ["rl_conformance.certify.testing"]

    # test_rollouts.py
    import pytest
    from rl_conformance.certify.testing import SCENARIO_NAMES

    @pytest.mark.parametrize("scenario", SCENARIO_NAMES)
    def test_rollout_client_keeps_the_contract(certify_scenario, scenario):
        certify_scenario(make_my_adapter, scenario).assert_passed()

Each call starts its own fake fleet and recording proxy (127.0.0.1, ephemeral ports) and stops
them before it returns.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ..model.matrix import Outcome
from .protocol import AdapterFactory
from .runner import ScenarioResult, run_scenario
from .scenarios import SCENARIOS, scenario

SCENARIO_NAMES: tuple[str, ...] = tuple(s.name for s in SCENARIOS)


class CertificationFailed(AssertionError):
    pass


def assert_passed(result: ScenarioResult) -> None:
    """Raise `CertificationFailed` naming each failed checklist item with its evidence and the
    scenario's audit log; skip the test (never exercised, naming why) where no item passed:
    a scenario that gave nothing to judge certifies nothing."""
    if result.error is None and not result.failed:
        if not any(finding.outcome == Outcome.PASS for finding in result.findings):
            reasons = dict.fromkeys(
                f"{finding.check_id}: {finding.message}"
                for finding in result.findings
                if finding.outcome == Outcome.SKIPPED
            )
            pytest.skip(
                f"scenario {result.scenario.name}: no checklist item was exercised"
                + (f" ({result.not_run})" if result.not_run else "")
                + "".join(f"\n  {reason}" for reason in reasons)
            )
        return
    lines = [f"scenario {result.scenario.name} ({result.scenario.title}):"]
    if result.error is not None:
        lines.append(f"  error: {result.error}")
    for finding in result.failed:
        lines.append(f"  {finding.check_id}: {finding.message}")
        lines.append(f"    expected: {finding.expected!r}")
        lines.append(f"    observed: {finding.observed!r}")
    lines.append("  steps:")
    lines.extend(f"    {step.kind} {step.label}: {step.outcome}" for step in result.steps)
    lines.append("  audit log:")
    lines.extend(
        f"    #{r['seq']} {r['method']} {r['plane']}{r['path']} -> {r['status']} ({r['delivery']})"
        for r in result.audit
    )
    raise CertificationFailed("\n".join(lines))


class Certification:
    def __init__(self, result: ScenarioResult) -> None:
        self.result = result

    def assert_passed(self) -> None:
        assert_passed(self.result)


@pytest.fixture
def certify_scenario() -> Callable[[AdapterFactory, str], Certification]:
    def run(factory: AdapterFactory, name: str) -> Certification:
        return Certification(
            run_scenario(getattr(factory, "__name__", "adapter"), factory, scenario(name))
        )

    return run


__all__ = ["Certification", "CertificationFailed", "assert_passed", "certify_scenario"]
