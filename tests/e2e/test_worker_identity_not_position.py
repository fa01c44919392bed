"""A faithful deployment whose RL listener lists the same workers in another order on every read
(which the spec allows: "Do not ... interpret list position as worker identity") passes the
mutating administration and refresh rows by URL.

The suite once acted on whichever worker a test's discovery read listed first, so consecutive
tests updated different workers with the alternating checkpoints, and the lifecycle then loaded
onto a worker the checkpoint it already held: "the old weights are still serving". The rows
below, in this order, are the shortest run that showed it; with a listener that rotates its list,
every control-plane test now acts on the same worker, chosen by identity."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fake_backends import FakeDeployment

pytestmark = pytest.mark.slow
CHECKPOINTS = ("--update-model-path", "/checkpoints/a", "--update-model-path", "/checkpoints/b")
ROWS = (
    "admin.route_negotiation",
    "admin.success_semantics",
    "refresh.pause_gates",
    "refresh.post_update_generation",
    "refresh.lifecycle",
)
UPDATED_PATHS = ("/engine/update_weights_from_disk",)


def run_by_url(fleet: FakeDeployment, directory: Path) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "rl_conformance",
        "run",
        "-q",
        "--jobs",
        "1",
        "--frontend",
        fleet.frontend_url,
        "--rl-url",
        fleet.rl_url,
        "--backend",
        "vllm",
        "--report-dir",
        str(directory),
        "--examples",
        "2",
        "--allow-mutations",
        "--all-workers",
        *CHECKPOINTS,
    ]
    for row in ROWS:
        command += ["--capability", row]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert (directory / "matrix.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    matrix: dict[str, Any] = json.loads((directory / "matrix.json").read_text())
    return matrix


@pytest.mark.parametrize("listing_order", ["rotated", "shuffled"])
def test_control_rows_pass_when_every_read_reorders_the_workers(
    listing_order: str, tmp_path: Path
) -> None:
    with FakeDeployment("vllm", workers=2, listing_order=listing_order) as fleet:
        matrix = run_by_url(fleet, tmp_path)
        ledger = fleet.admin_ledger
        first = min(worker["instance_id"] for worker in fleet.workers)
    (target,) = matrix["targets"]
    cells = {row["id"]: row["cells"][target["id"]] for row in matrix["capabilities"]}
    outcomes = {row: cells[row]["outcome"] for row in ROWS}
    assert outcomes == dict.fromkeys(ROWS, "pass"), {
        row: cells[row]["reason"] for row in ROWS if cells[row]["outcome"] != "pass"
    }
    # Every single-worker update went to one worker, chosen by identity; each worker saw every
    # update alternate between the two checkpoints (none was loaded onto a worker holding it).
    held: dict[int, list[str]] = {}
    for record in ledger:
        if record.path in UPDATED_PATHS:
            held.setdefault(record.instance_id, []).append(record.body["model_path"])
    assert first in held and len(held) == 2
    for paths in held.values():
        assert all(a != b for a, b in itertools.pairwise(paths)), held
