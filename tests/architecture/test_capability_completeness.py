"""A registered capability is complete: a suite test certifies it, and a named fault of the fakes
is reviewed to flip it (so the kill matrix shows its checks can fail). CONTRIBUTING.md's recipe
for adding a capability is held here: leaving out either piece fails, naming the capability."""

from __future__ import annotations

import json
from pathlib import Path

from fake_backends import FAULT_NAMES
from rl_conformance.model.capabilities import BY_ID
from rl_conformance.reports.suite_index import suite_tests

ROOT = Path(__file__).resolve().parents[2]


def certified_by_suites() -> set[str]:
    return {test.capability for test in suite_tests(ROOT / "suites") if test.capability}


def reviewed_flips() -> dict[str, list[str]]:
    path = ROOT / "fixtures" / "expected" / "kill-matrix-flips.json"
    return json.loads(path.read_text(encoding="utf-8"))["flips"]


def test_every_capability_has_a_suite_test() -> None:
    missing = sorted(set(BY_ID) - certified_by_suites())
    assert not missing, f"no suite test carries @capability(...) for: {', '.join(missing)}"


def test_every_suite_marker_names_a_registered_capability() -> None:
    unknown = sorted(certified_by_suites() - set(BY_ID))
    assert not unknown, f"suites mark capabilities the registry lacks: {', '.join(unknown)}"


def test_every_capability_is_flipped_by_a_reviewed_fault() -> None:
    flips = reviewed_flips()
    flipped = {capability for capabilities in flips.values() for capability in capabilities}
    missing = sorted(set(BY_ID) - flipped)
    assert not missing, "no fault in fixtures/expected/kill-matrix-flips.json flips: " + ", ".join(
        missing
    )
    assert set(flips) == set(FAULT_NAMES), "the reviewed flips and the fault catalogue differ"
