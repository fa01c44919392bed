"""`rl-conformance run` with no target: the four fakes (vLLM with the Python worker's routes,
SGLang, TensorRT-LLM, vLLM with the native sidecar's), and a matrix that agrees with the spec's
Backend Compatibility and administration tables row by row."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from rl_conformance.checks import schema_check
from rl_conformance.contract.kinds import Capability, Support
from rl_conformance.model.capabilities import CAPABILITIES
from rl_conformance.reports.bundle import verify_index
from rl_conformance.reports.record_rules import structure_findings

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

P, U = "pass", "unsupported"
OWN_CELLS: dict[str, tuple[str, str, str, str]] = {  # (vllm, sglang, trtllm, vllm-sidecar)
    # the fakes' SGLang serves prompt logprobs on every topology; TensorRT-LLM documents none
    "logprobs.prompt_alignment": (P, P, U, P),
    # the native route is SGLang's; vLLM's experimental one is not the fake vLLM's
    "generate.native_route": (U, P, U, U),
    # the vLLM Python worker stays routed while paused and advertises no sleep
    "admin.stopped_worker_unrouted": (U, P, P, P),
    # the sidecar documents no pause before its transfer lifecycle
    "admin.unpaused_update_refused": (P, U, U, "skipped"),
    # only the Python worker declares versions; the sidecar advertises no set_weight_version
    "admin.version_declaration": (P, U, U, "not-advertised"),
    # SGLang's family reads no weight version to hold a restarted engine to
    "refresh.recovered_worker": (P, U, U, P),
    # the sidecar's updates are transfers: no checkpoint directory to hold the served policy to
    "refresh.served_policy_verified": (P, P, U, "skipped"),
    "telemetry.weight_update_gauge": ("skipped", U, U, P),
}
"""The reviewed cells that do not follow from the row's documented support alone; every other
row's cells do (`documented_cells`), so a new row whose fakes' cells follow its documented
support adds nothing here."""


def documented_cells(row: Capability) -> tuple[str, str, str, str]:
    """Each fake passes where the row documents its backend as anything but unsupported; vLLM
    with the native sidecar's routes as vLLM."""
    vllm, sglang, trtllm = (
        U if row.support_for(backend) is Support.UNSUPPORTED else P
        for backend in ("vllm", "sglang", "trtllm")
    )
    return vllm, sglang, trtllm, vllm


EXPECTED = {row.id: OWN_CELLS.get(row.id) or documented_cells(row) for row in CAPABILITIES}
TARGETS = ("fake-vllm", "fake-sglang", "fake-trtllm", "fake-vllm-sidecar")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    directory = tmp_path_factory.mktemp("report")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "--report-dir",
            str(directory),
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=directory,
    )
    return directory, run


def cells(directory: Path) -> dict[str, dict[str, Any]]:
    matrix = json.loads((directory / "matrix.json").read_text())
    return {row["id"]: row["cells"] for row in matrix["capabilities"]}


def test_each_own_cell_differs_from_the_documented_support() -> None:
    assert set(OWN_CELLS) <= {capability.id for capability in CAPABILITIES}
    rows = {capability.id: capability for capability in CAPABILITIES}
    same = [name for name, cells in OWN_CELLS.items() if cells == documented_cells(rows[name])]
    assert not same, f"follow from the documented support (drop from OWN_CELLS): {same}"


def test_default_run_passes_and_prints_the_matrix(report: Any) -> None:
    directory, run = report
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "conformance matrix" in run.stdout
    matrix = json.loads((directory / "matrix.json").read_text())
    assert schema_check("matrix", matrix).passed
    assert matrix["complete"] is True
    assert [target["id"] for target in matrix["targets"]] == list(TARGETS)
    assert len(matrix["capabilities"]) >= 20


@pytest.mark.parametrize("capability_id", sorted(EXPECTED))
def test_cell_agrees_with_the_documented_support(report: Any, capability_id: str) -> None:
    directory, _ = report
    row = cells(directory)[capability_id]
    observed = tuple(row[target]["outcome"] for target in TARGETS)
    reasons = {target: row[target]["reason"] for target in TARGETS}
    assert observed == EXPECTED[capability_id], reasons


def test_reports_in_every_format(report: Any) -> None:
    directory, _ = report
    suites = ElementTree.parse(directory / "junit.xml").getroot()
    assert [suite.get("name") for suite in suites] == list(TARGETS)
    assert "| capability |" in (directory / "matrix.md").read_text()
    assert "<table id='grid'>" in (directory / "matrix.html").read_text()


def test_every_target_has_a_dynamo_run_record_and_the_bundle_is_closed(report: Any) -> None:
    """A clean default run: per target a structurally valid dynamo.rl.validation.v1 record,
    no gate failed, every gate it judged passed (a deployment run does not train), and a bundle
    index every file and every record's artifact URI agrees with."""
    directory, run = report
    for target in TARGETS:
        record = json.loads((directory / "validation" / f"{target}.json").read_text())
        assert structure_findings(record) == [], target
        statuses = {name: gate["status"] for name, gate in record["gates"].items()}
        assert "failed" not in statuses.values(), (target, statuses)
        assert statuses["training_iteration"] == "not_run"
        assert statuses["token_logprob"] == statuses["trace_correlation"] == "passed", target
        assert record["record_state"] == "passed"
    index = json.loads((directory / "bundle.json").read_text())
    assert index["closure_status"] == "complete"
    digest = next(line for line in run.stdout.splitlines() if "bundle.json sha256" in line)
    assert verify_index(directory, digest.split("sha256 ")[1].split()[0]) == []


def test_the_capability_reference_regenerates_byte_for_byte(report: Any) -> None:
    """docs/CAPABILITIES.md from this run's matrix (another seed than the documented command's,
    as a clean clone's hypothesis release draws other examples) is the committed file."""
    directory, _ = report
    regenerated = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "capabilities",
            "--markdown",
            "--matrix",
            str(directory / "matrix.json"),
            "--flips",
            str(ROOT / "fixtures" / "expected" / "kill-matrix-flips.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert regenerated == (ROOT / "docs" / "CAPABILITIES.md").read_text(), (
        "docs/CAPABILITIES.md is stale: regenerate it as CONTRIBUTING.md says"
    )


def test_a_logprob_fault_fails_the_token_logprob_gate(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "--fake",
            "vllm",
            "--fault",
            "logprobs_reordered",
            "--capability",
            "logprobs.selected_alignment",
            "--capability",
            "tokens.completion_ids",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout[-3000:]
    record = json.loads((tmp_path / "validation" / "fake-vllm.json").read_text())
    token = record["gates"]["token_logprob"]
    assert (token["status"], token["completion_logprobs_aligned"]) == ("failed", False)
    assert record["record_state"] == "failed"
    assert any("refresh.version_verified: not run" in line for line in record["limitations"])
