"""Adapter certification on the other administration families: each family's reference adapter
passes every scenario its fleet can stage, its broken twins fail exactly where reviewed
(fixtures/expected/adapter-twins.json), and a scenario the fleet cannot stage is reported as not
run, naming why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.certify.checklist import CHECKS
from rl_conformance.certify.fleets import FLEETS
from rl_conformance.certify.scenarios import SCENARIOS
from rl_conformance.certify.twins import FAMILY_REFERENCES, FAMILY_TWINS
from rl_conformance.reports.record_rules import structure_findings
from rl_conformance.reports.validation import safe_name

from .cli_runs import certify

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
EXPECTED: dict[str, dict[str, list[str]]] = json.loads(
    (ROOT / "fixtures" / "expected" / "adapter-twins.json").read_text()
)["failures"]
FAMILIES = ("vllm-sidecar", "sglang")


@pytest.fixture(scope="module", params=FAMILIES)
def family_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path, int, dict[str, Any], list[dict[str, Any]]]:
    family = request.param
    directory = tmp_path_factory.mktemp(family)
    exit_code, matrix, audits = certify(directory, "--reference", "--family", family, "--jobs", "6")
    return family, directory, exit_code, matrix, audits


def _failures(audits: list[dict[str, Any]], adapter: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for audit in audits:
        if audit["adapter"] == adapter:
            assert audit["error"] is None, audit["error"]
            failed = sorted(f["check"] for f in audit["findings"] if f["outcome"] == "fail")
            if failed:
                out[audit["scenario"]] = failed
    return out


def test_the_family_reference_passes_and_its_twin_fails_as_reviewed(family_run: Any) -> None:
    family, directory, exit_code, matrix, audits = family_run
    (reference,) = FAMILY_REFERENCES[family]
    twins = list(FAMILY_TWINS[family])
    assert _failures(audits, reference) == {}
    for twin in twins:
        assert _failures(audits, twin) == EXPECTED[twin] != {}, twin
    assert [t["id"] for t in matrix["targets"]] == [reference, *twins]
    assert all(t["backend"] == FLEETS[family].backend for t in matrix["targets"])
    assert matrix["exit_rule"]["problems"] == []
    assert exit_code == 0
    for adapter in (reference, *twins):
        record = json.loads((directory / "validation" / f"{safe_name(adapter)}.json").read_text())
        assert structure_findings(record) == [], adapter
    cells = {row["id"]: row["cells"][reference]["outcome"] for row in matrix["capabilities"]}
    assert set(cells.values()) <= {"pass", "unsupported"}  # unsupported: not discovered
    assert cells["adapter.complete_iteration"] == "pass"
    assert cells["adapter.gated_after_failure"] == "pass"


def test_scenarios_a_fleet_cannot_stage_are_reported_not_run(family_run: Any) -> None:
    family, _, _, _, audits = family_run
    fleet = FLEETS[family]
    (reference,) = FAMILY_REFERENCES[family]
    ran = {a["scenario"]: a for a in audits if a["adapter"] == reference}
    assert set(ran) == {s.name for s in SCENARIOS}
    for scenario in SCENARIOS:
        reason = scenario.unsupported(fleet)
        findings = ran[scenario.name]["findings"]
        if reason is None:
            assert ran[scenario.name]["steps"], scenario.name
            continue
        assert not ran[scenario.name]["steps"]
        assert [f["check"] for f in findings] == list(CHECKS)
        assert {f["outcome"] for f in findings} == {"skipped"}
        assert all(reason in f["message"] and fleet.name in f["message"] for f in findings)
    skipped = {name for name, audit in ran.items() if not audit["steps"]}
    if family == "sglang":
        # Nothing registers SGLang workers with discovery: its scenarios cannot be staged.
        assert "worker_leaves" in skipped and "discovery_entry_error" in skipped
        assert "flush_fails" not in skipped  # an adapter that flushes meets the failure
    else:
        assert skipped == {"flush_fails"}  # the sidecar has no flush route


def test_the_reference_drives_the_family_routes(family_run: Any) -> None:
    family, _, _, _, audits = family_run
    fleet = FLEETS[family]
    (reference,) = FAMILY_REFERENCES[family]
    audit = next(a for a in audits if a["adapter"] == reference and a["scenario"] == "iteration")
    calls = [(r["path"].removeprefix("/engine/"), r.get("body")) for r in audit["audit"]]
    routes = [route for route, _ in calls if not route.startswith("/")]
    assert {fleet.pause, fleet.update, fleet.version, fleet.resume} <= set(routes)
    discovery = [r for r in audit["audit"] if r["path"] == "/v1/rl/workers"]
    if family == "sglang":
        assert not discovery  # the workers are the URLs the deployment supplied
        update = next(body for route, body in calls if route == fleet.update)
        assert "flush_cache" not in update  # SGLang's default flushes
    else:
        assert discovery
        pause = next(body for route, body in calls if route == fleet.pause)
        assert pause == {"mode": "wait", "clear_cache": True}
        finish = next(body for route, body in calls if route == fleet.update)
        assert finish == {"weight_version": "policy-v1"}
