"""Adapter certification proves itself: the reference adapter passes every scenario, each broken
twin fails exactly the (scenario, checklist item) pairs reviewed in
fixtures/expected/adapter-twins.json, every checklist item is failed by some twin, and the
report is a valid matrix in every format, with a Dynamo run record per adapter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from rl_conformance.certify.checklist import CHECKS
from rl_conformance.certify.loading import load_factory
from rl_conformance.certify.scenarios import SCENARIOS
from rl_conformance.certify.twins import FAMILY_REFERENCES, FAMILY_TWINS
from rl_conformance.errors import ConfigurationError
from rl_conformance.reports.bundle import verify_index
from rl_conformance.reports.record_rules import structure_findings
from rl_conformance.reports.validation import safe_name
from rl_conformance.reports.validation_gates import ADAPTER_GATES, Gate

from .cli_runs import certify

pytestmark = pytest.mark.slow
SHIM = "examples.my_adapter:MyAdapter"
ROOT = Path(__file__).resolve().parents[2]
EXPECTED: dict[str, dict[str, list[str]]] = json.loads(
    (ROOT / "fixtures" / "expected" / "adapter-twins.json").read_text()
)["failures"]
TWINS = FAMILY_TWINS["vllm"]
REFERENCES = FAMILY_REFERENCES["vllm"]


@pytest.fixture(scope="module")
def self_check_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("certify")


@pytest.fixture(scope="module")
def self_check(self_check_directory: Path) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    return certify(self_check_directory, "--reference", SHIM, "--jobs", "6")


def _expected_gate(twin: str, gate: Gate, audits: list[dict[str, Any]]) -> str:
    """What the reviewed failures of `twin` make of `gate`, by the gate table; a gate none of
    whose inputs failed is passed only where each passed in its scenarios."""
    if gate.not_run_because:
        return "not_run"
    reviewed = EXPECTED.get(twin, {})
    for item in gate.inputs:
        for scenario, checks in reviewed.items():
            if item.capability in checks and (not item.scenarios or scenario in item.scenarios):
                return "failed"
    for item in gate.inputs:
        outcomes = {
            finding["outcome"]
            for audit in audits
            if audit["adapter"] == twin
            and (not item.scenarios or audit["scenario"] in item.scenarios)
            for finding in audit["findings"]
            if finding["check"] == item.capability
        }
        if "pass" not in outcomes and not (item.optional and outcomes <= {"not-applicable"}):
            return "not_run"
    return "passed"


def test_every_adapter_has_a_record_whose_gates_follow_the_scenarios(
    self_check: Any, self_check_directory: Path
) -> None:
    """One dynamo.rl.validation.v1 record per adapter: structurally valid, its gates failed
    exactly where a reviewed failure of a scenario feeds them, and the bundle closed."""
    _, matrix, audits = self_check
    adapters = [target["id"] for target in matrix["targets"]]
    for adapter in adapters:
        path = self_check_directory / "validation" / f"{safe_name(adapter)}.json"
        record = json.loads(path.read_text())
        assert structure_findings(record) == [], adapter
        statuses = {name: gate["status"] for name, gate in record["gates"].items()}
        expected = {gate.name: _expected_gate(adapter, gate, audits) for gate in ADAPTER_GATES}
        assert statuses == expected, adapter
        assert record["record_state"] == ("failed" if "failed" in expected.values() else "passed")
        assert (
            record["framework"]["name"] == adapter and record["framework"]["integration_artifact"]
        )
    reference = json.loads((self_check_directory / "validation" / "reference.json").read_text())
    update = reference["gates"]["policy_update"]
    assert update["target_version"] in {"policy-v1", "policy-v2"}
    assert (update["workers_targeted"], update["workers_verified"]) == (2, 2)
    assert update["cache_handling"] == "invalidated"
    assert verify_index(self_check_directory) == []


def failures(audits: list[dict[str, Any]], adapter: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for audit in audits:
        if audit["adapter"] != adapter:
            continue
        assert audit["error"] is None, audit["error"]
        failed = sorted(f["check"] for f in audit["findings"] if f["outcome"] == "fail")
        if failed:
            out[audit["scenario"]] = failed
    return out


@pytest.mark.parametrize("reference", sorted(REFERENCES))
def test_the_reference_adapters_pass_every_scenario(self_check: Any, reference: str) -> None:
    _, matrix, audits = self_check
    assert failures(audits, reference) == {}
    cells = {row["id"]: row["cells"][reference]["outcome"] for row in matrix["capabilities"]}
    assert cells == dict.fromkeys(CHECKS, "pass")
    assert len([a for a in audits if a["adapter"] == reference]) == len(SCENARIOS)


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_each_twin_fails_exactly_its_reviewed_scenarios(self_check: Any, twin: str) -> None:
    _, _, audits = self_check
    assert failures(audits, twin) == EXPECTED[twin]


def test_every_checklist_item_can_fail_and_every_twin_is_caught(self_check: Any) -> None:
    exit_code, matrix, _ = self_check
    assert set(EXPECTED) == {twin for twins in FAMILY_TWINS.values() for twin in twins}
    failed_items = {
        check for twin in EXPECTED.values() for checks in twin.values() for check in checks
    }
    assert failed_items == set(CHECKS)
    assert all(EXPECTED[twin] for twin in TWINS)
    for row in matrix["capabilities"]:
        failing = [t for t, cell in row["cells"].items() if cell["outcome"] == "fail"]
        assert failing, f"{row['id']} fails no adapter"
        for target in failing:
            evidence = row["cells"][target]["evidence"]
            assert evidence and evidence[0]["message"].split(":")[0] in EXPECTED[target]
    # The twins are meant to fail and failed as reviewed; the adapters under test passed.
    assert matrix["exit_rule"]["problems"] == []
    assert set(matrix["exit_rule"]["exempt"]) == set(TWINS)
    assert exit_code == 0


def test_the_adapter_matrix_is_a_valid_matrix_in_every_format(
    self_check: Any, tmp_path: Path
) -> None:
    _, matrix, audits = self_check
    schema = json.loads((ROOT / "schemas" / "matrix.json").read_text())
    errors = sorted(Draft202012Validator(schema).iter_errors(matrix), key=str)
    assert not errors, [error.message for error in errors[:5]]
    assert [t["id"] for t in matrix["targets"]] == [SHIM, *REFERENCES, *TWINS]
    audit = next(a for a in audits if a["adapter"] == "reference" and a["scenario"] == "iteration")
    assert [step["kind"] for step in audit["steps"]] == [
        "generate",
        "generate",
        "refresh",
        "generate",
    ]
    assert any(r["path"] == "/engine/update_weights_from_disk" for r in audit["audit"])


def test_the_readme_example_shim_passes_every_scenario(self_check: Any) -> None:
    _, matrix, audits = self_check
    shim = (ROOT / "examples" / "my_adapter.py").read_text()
    assert shim in (ROOT / "docs" / "ADAPTERS.md").read_text(), (
        "docs/ADAPTERS.md must show examples/my_adapter.py verbatim"
    )
    assert len(shim.splitlines()) < 60
    assert failures(audits, SHIM) == {}
    assert len([a for a in audits if a["adapter"] == SHIM]) == len(SCENARIOS)
    cells = {row["id"]: row["cells"][SHIM]["outcome"] for row in matrix["capabilities"]}
    assert cells == dict.fromkeys(CHECKS, "pass")  # unary: each scenario stages its own events


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "expected MODULE:FACTORY"),
        ("no_such_module_xyz:f", "cannot import module 'no_such_module_xyz'"),
        ("json:no_such_factory", "has no attribute 'no_such_factory'"),
        ("json:__name__", "expected a callable"),
    ],
)
def test_a_bad_factory_is_named(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load_factory(spec)


def test_the_cli_names_unknown_scenarios(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "certify-adapter",
            "--reference",
            "--scenario",
            "nope",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--scenario: unknown nope; expected one of iteration" in done.stderr
