"""Safety and strength of the control-plane suites against our fakes.

- A read-only run (the default against any deployment that is not our own fake) sends no
  request to an admin route other than the families' read-only probes (liveness_probe,
  get_weight_version; the sidecar's control/is_paused, control/get_weight_version) and /health.
- With mutations allowed on every worker, the admin and refresh rows pass.
- The refresh lifecycle state machine finds no violation on clean fakes over 100 examples each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_backends import FakeDeployment

pytestmark = pytest.mark.slow
CHECKPOINTS = (
    "--update-model-path",
    "/conformance/weights/a",
    "--update-model-path",
    "/conformance/weights/b",
)
READ_ONLY_PATHS = {
    "/engine/liveness_probe",
    "/engine/get_weight_version",
    "/engine/control/is_paused",
    "/engine/control/get_weight_version",
    "/health",
    "/live",
}
CONTROL_ROWS = (
    "admin.route_negotiation",
    "admin.success_semantics",
    "refresh.pause_gates",
    "refresh.version_verified",
    "refresh.post_update_generation",
    "refresh.kv_invalidation",
    "refresh.lifecycle",
)


@pytest.fixture
def fleet() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", workers=2) as deployment:
        yield deployment


def run_external(deployment: FakeDeployment, directory: Path, *flags: str) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "rl_conformance",
        "run",
        "-q",
        "--frontend",
        deployment.frontend_url,
        "--rl-url",
        deployment.rl_url,
        "--backend",
        "vllm",
        "--report-dir",
        str(directory),
        "--examples",
        "3",
        *flags,
    ]
    subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    return json.loads((directory / "matrix.json").read_text())


def test_read_only_run_sends_no_mutating_admin_call(fleet: FakeDeployment, tmp_path: Path) -> None:
    matrix = run_external(fleet, tmp_path)
    paths = {record.path for record in fleet.admin_ledger}
    assert paths, "the run administered nothing at all: the read-only probes did not run"
    assert paths <= READ_ONLY_PATHS, sorted(paths - READ_ONLY_PATHS)
    cells = {row["id"]: row["cells"]["external-vllm"] for row in matrix["capabilities"]}
    assert cells["refresh.version_verified"]["outcome"] == "skipped"
    assert "read-only run" in cells["refresh.version_verified"]["reason"]


def test_read_only_run_sends_no_mutating_call_to_a_sidecar(tmp_path: Path) -> None:
    """Any HTTP method dispatches on the real sidecar (a GET pauses), so read-only means
    calling nothing but its read routes (fixtures/dynamo-1.6.1/vllm-sidecar/pause_get.json)."""
    with FakeDeployment("vllm", workers=2, admin_family="sidecar") as sidecars:
        run_external(sidecars, tmp_path)
        paths = {record.path for record in sidecars.admin_ledger}
    assert "/engine/control/is_paused" in paths, sorted(paths)
    assert paths <= READ_ONLY_PATHS, sorted(paths - READ_ONLY_PATHS)


def test_chosen_worker_only_is_mutated(fleet: FakeDeployment, tmp_path: Path) -> None:
    chosen = fleet.workers[0]["instance_id"]
    run_external(
        fleet,
        tmp_path,
        "--allow-mutations",
        "--worker",
        str(chosen),
        "--capability",
        "refresh.version_verified",
        *CHECKPOINTS,
    )
    mutated = {
        record.instance_id for record in fleet.admin_ledger if record.path not in READ_ONLY_PATHS
    }
    assert mutated == {chosen}


def test_control_rows_pass_with_mutations_on_every_worker(
    fleet: FakeDeployment, tmp_path: Path
) -> None:
    matrix = run_external(fleet, tmp_path, "--allow-mutations", "--all-workers", *CHECKPOINTS)
    cells = {row["id"]: row["cells"]["external-vllm"] for row in matrix["capabilities"]}
    assert {row: cells[row]["outcome"] for row in CONTROL_ROWS} == dict.fromkeys(
        CONTROL_ROWS, "pass"
    )


def test_refresh_state_machine_finds_nothing_on_clean_fakes_over_100_examples_each(
    tmp_path: Path,
) -> None:
    command = [
        sys.executable,
        "-m",
        "rl_conformance",
        "run",
        "-q",
        "--fake",
        "vllm",
        "--fake",
        "sglang",
        "--capability",
        "refresh.lifecycle",
        "--examples",
        "100",
        "--report-dir",
        str(tmp_path),
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    cells = matrix["capabilities"][0]["cells"]
    assert {target: cell["outcome"] for target, cell in cells.items()} == {
        "fake-vllm": "pass",
        "fake-sglang": "pass",
    }, run.stdout[-3000:]
