"""docs/CAPABILITIES.md is generated from the registry and the reviewed kill-matrix flips, and
kept in step with both (the checks come from a run's matrix, so they are only required to be
listed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rl_conformance.cli.capabilities import faults_by_capability, render_reference
from rl_conformance.model.capabilities import CAPABILITIES

ROOT = Path(__file__).resolve().parents[2]


def test_the_reference_matches_the_registry_and_the_flips() -> None:
    committed = (ROOT / "docs" / "CAPABILITIES.md").read_text()
    flips = json.loads((ROOT / "fixtures" / "expected" / "kill-matrix-flips.json").read_text())
    checks = {
        found.group(1): re.findall(r"`([^`]+)`", found.group(2))
        for found in re.finditer(r"### `([^`]+)`.*?\n- checks: ([^\n]*)", committed, re.S)
    }
    regenerated = render_reference(tuple(CAPABILITIES), checks, faults_by_capability(flips))
    assert committed == regenerated, (
        "regenerate: rl-conformance capabilities --markdown --matrix conformance-report/"
        "matrix.json --flips fixtures/expected/kill-matrix-flips.json > docs/CAPABILITIES.md"
    )
    assert set(checks) == {capability.id for capability in CAPABILITIES}
    assert all(checks.values())
