"""`--budget-generations` against a deployment: no more generation requests than the budget
reach it, MUST tests are covered before SHOULD ones, and the matrix names what the budget left
uncovered; `--dry-run` starts nothing and says what a run would cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BUDGET = 40


def rl_conformance(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rl_conformance", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_budget_caps_generations_and_names_what_it_left_uncovered(tmp_path: Path) -> None:
    done = rl_conformance(
        "run", "-q", "--fake", "trtllm", "--budget-generations", str(BUDGET),
        "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    budget = matrix["budget"]
    assert budget["generations_per_target"] == BUDGET
    assert 0 < budget["generations_sent"]["fake-trtllm"] <= BUDGET
    uncovered = {entry["capability"] for entry in budget["uncovered"]}
    assert uncovered, "a budget this small must leave something uncovered"
    cells = {row["id"]: row["cells"]["fake-trtllm"] for row in matrix["capabilities"]}
    for capability_id in uncovered:
        assert cells[capability_id]["outcome"] == "skipped"
        assert "--budget-generations 40" in cells[capability_id]["reason"]
    # MUST before SHOULD: a MUST test is left out only when it does not fit in what the MUST
    # tests taken left; SHOULD tests use what remains
    planned = rl_conformance(
        "run", "--dry-run", "--fake", "trtllm", "--budget-generations", str(BUDGET),
        "--report-dir", str(tmp_path / "plan"),
    )  # fmt: skip
    assert planned.returncode == 0
    tests = json.loads((tmp_path / "plan" / "plan.json").read_text())["tests"]
    must = [test for test in tests if test["level"] == "MUST"]
    taken = sum(test["estimated_generations"] for test in must if test["selected"])
    left_out = [test for test in must if not test["selected"]]
    assert left_out and all(t["estimated_generations"] > BUDGET - taken for t in left_out)
    assert sum(t["estimated_generations"] for t in tests if t["selected"]) <= BUDGET


def test_a_dry_run_starts_nothing_and_prices_the_run(tmp_path: Path) -> None:
    done = rl_conformance(
        "run", "--dry-run", "--budget-generations", "50", "--report-dir", str(tmp_path)
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "fake_backends" not in done.stdout + done.stderr
    assert not (tmp_path / "matrix.json").exists()
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert set(plan["targets"]) == {"fake-vllm", "fake-sglang", "fake-trtllm", "fake-vllm-sidecar"}
    for totals in plan["targets"].values():
        assert totals["selected_generations"] <= 50 < totals["estimated_generations"]
    assert "--budget-generations 50 covers" in done.stdout
    listed = [line for line in done.stdout.splitlines() if line.startswith(("run ", "skip "))]
    assert len(listed) == len(plan["tests"])
