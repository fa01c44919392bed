"""A fleet of eight workers run by URL judges a pause's effects on a sample of them (named on the
cell), and still reads what the spec asks of every worker on each: an update one worker outside
the sample never applies (it answers ok, keeps its weights and its version) fails the version
and the post-update generation, naming that worker; the faithful fleet passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fake_backends import FakeDeployment

pytestmark = pytest.mark.slow
WORKERS = 8
CHECKPOINTS = ("--update-model-path", "/checkpoints/a", "--update-model-path", "/checkpoints/b")
EVERY = ("refresh.version_verified", "refresh.post_update_generation")
SAMPLED = "refresh.pause_gates"


def run_by_url(fleet: FakeDeployment, directory: Path) -> dict[str, dict[str, Any]]:
    command = [
        *(sys.executable, "-m", "rl_conformance", "run", "-q", "--jobs", "1"),
        *("--frontend", fleet.frontend_url, "--rl-url", fleet.rl_url, "--backend", "vllm"),
        *("--report-dir", str(directory), "--examples", "2"),
        *("--allow-mutations", "--all-workers", *CHECKPOINTS),
    ]
    for row in (*EVERY, SAMPLED):
        command += ["--capability", row]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert (directory / "matrix.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    matrix = json.loads((directory / "matrix.json").read_text())
    (target,) = matrix["targets"]
    return {row["id"]: row["cells"][target["id"]] for row in matrix["capabilities"]}


def judged(cell: dict[str, Any]) -> list[str]:
    facts = [test.get("measured", {}).get("judged_workers") for test in cell["tests"]]
    return [label for fact in facts if fact for label in fact["judged"]]


def test_a_faithful_fleet_passes_and_names_its_sample(tmp_path: Path) -> None:
    with FakeDeployment("vllm", workers=WORKERS) as fleet:
        cells = run_by_url(fleet, tmp_path)
    assert {row: cells[row]["outcome"] for row in (*EVERY, SAMPLED)} == dict.fromkeys(
        (*EVERY, SAMPLED), "pass"
    ), {row: cells[row]["reason"] for row in cells}
    assert f"judged on 4 of {WORKERS} selected workers (sampled: " in cells[SAMPLED]["reason"]
    assert len(set(judged(cells[SAMPLED]))) == 4
    assert "judged on" not in cells["refresh.version_verified"]["reason"]


def test_an_update_one_unsampled_worker_never_applies_still_fails(tmp_path: Path) -> None:
    with FakeDeployment("vllm", workers=WORKERS) as fleet:
        by_identity = sorted(fleet.state.workers, key=lambda worker: worker.instance_id)
        lazy = by_identity[1]  # the sample of 8 is the 1st, 3rd, 6th and 8th by identity
        lazy.load_weights = lambda tag: None  # type: ignore[method-assign]
        lazy.declare_version = lambda version: None  # type: ignore[method-assign]
        cells = run_by_url(fleet, tmp_path)
    name = f"worker {lazy.instance_id}"
    assert name not in judged(cells[SAMPLED]) and len(set(judged(cells[SAMPLED]))) == 4
    assert cells[SAMPLED]["outcome"] == "pass", cells[SAMPLED]["reason"]
    for row in EVERY:
        assert cells[row]["outcome"] == "fail", (row, cells[row]["reason"])
        assert name in cells[row]["reason"] + json.dumps(cells[row]["evidence"]), row
