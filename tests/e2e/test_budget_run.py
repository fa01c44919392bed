"""`--budget-generations` against a deployment: no more generation requests than the budget
reach it, one test per capability runs before any second test (MUST rows first), the matrix names
what the budget left uncovered, a property test runs with fewer examples rather than not at all,
and a read-only run sends no generation for its mutating tests; `--dry-run` starts nothing and
says what a run, and covering every capability once, would cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.model.matrix import UNCOVERED_PREFIX

pytestmark = pytest.mark.slow

BUDGET = 40
EXHAUSTED = "generation requests; "  # BudgetExhausted: "... has had its N generation requests; "


def rl_conformance(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rl_conformance", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_matrix(directory: Path, *arguments: str) -> dict[str, Any]:
    done = rl_conformance("run", "-q", "--report-dir", str(directory), *arguments)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((directory / "matrix.json").read_text())


def dry_plan(directory: Path, *arguments: str) -> dict[str, Any]:
    done = rl_conformance("run", "--dry-run", "--report-dir", str(directory), *arguments)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((directory / "plan.json").read_text())


def cells_of(matrix: dict[str, Any], target: str) -> dict[str, dict[str, Any]]:
    return {row["id"]: row["cells"][target] for row in matrix["capabilities"]}


def test_a_budget_caps_generations_and_names_what_it_left_uncovered(tmp_path: Path) -> None:
    matrix = run_matrix(tmp_path, "--fake", "trtllm", "--budget-generations", str(BUDGET))
    budget = matrix["budget"]
    assert budget["generations_per_target"] == BUDGET
    assert 0 < budget["generations_sent"]["fake-trtllm"] <= BUDGET
    uncovered = {entry["capability"] for entry in budget["uncovered"]}
    assert uncovered, "a budget this small must leave something uncovered"
    cells = cells_of(matrix, "fake-trtllm")
    for capability_id in uncovered:
        assert cells[capability_id]["outcome"] == "skipped"
        assert "--budget-generations 40" in cells[capability_id]["reason"]
    # the rows a cheapest-first budget of 40 left out while it ran four variants of one test
    for capability_id in ("tokens.token_input", "logprobs.selected_alignment"):
        assert cells[capability_id]["outcome"] == "pass", cells[capability_id]["reason"]
    plan = dry_plan(tmp_path / "plan", "--fake", "trtllm", "--budget-generations", str(BUDGET))
    assert set(plan["targets"]["fake-trtllm"]["uncovered_capabilities"]) == uncovered
    assert sum(t["estimated_generations"] for t in plan["tests"] if t["selected"]) < BUDGET


def test_the_one_test_per_capability_budget_covers_what_the_full_run_covers(
    tmp_path: Path,
) -> None:
    plan = dry_plan(tmp_path / "plan", "--fake", "trtllm")
    figure = plan["targets"]["fake-trtllm"]["coverage"]["generations"]
    assert figure == plan["coverage_generations"]
    full = cells_of(run_matrix(tmp_path / "full", "--fake", "trtllm"), "fake-trtllm")
    matrix = run_matrix(
        tmp_path / "budget", "--fake", "trtllm", "--budget-generations", str(figure)
    )
    assert matrix["budget"]["uncovered"] == []
    assert matrix["budget"]["generations_sent"]["fake-trtllm"] <= figure
    budgeted = cells_of(matrix, "fake-trtllm")
    for capability_id, cell in full.items():
        # a row is covered when the budget ran one of its tests: a passing cell may still say
        # that its other tests did not run, but never that the budget left the row out
        reason = budgeted[capability_id]["reason"]
        assert not reason.startswith(UNCOVERED_PREFIX), (capability_id, reason)
        assert EXHAUSTED not in reason, (capability_id, reason)
        if cell["outcome"] != "skipped":
            assert budgeted[capability_id]["outcome"] == cell["outcome"], (capability_id, reason)


def test_a_property_test_runs_with_fewer_examples_rather_than_not_at_all(
    tmp_path: Path,
) -> None:
    only = ("--fake", "vllm", "--capability", "logprobs.selected_alignment")
    budget = 4  # the target's start (one token) and three examples, not the run's eight
    plan = dry_plan(tmp_path / "plan", *only, "--budget-generations", str(budget))
    (test,) = plan["tests"]
    assert test["selected"] and test["examples"] == budget - 1 < plan["examples"]
    matrix = run_matrix(tmp_path / "run", *only, "--budget-generations", str(budget))
    cell = cells_of(matrix, "fake-vllm")["logprobs.selected_alignment"]
    assert cell["outcome"] == "pass", cell["reason"]
    assert matrix["budget"]["generations_sent"]["fake-vllm"] == budget


def test_a_read_only_run_sends_no_generation_for_its_mutating_tests(tmp_path: Path) -> None:
    rows = ("refresh.pause_gates", "refresh.kv_invalidation", "refresh.post_update_generation")
    chosen = [argument for row in rows for argument in ("--capability", row)]
    matrix = run_matrix(tmp_path, "--fake", "vllm", "--read-only", *chosen)
    cells = cells_of(matrix, "fake-vllm")
    tests = [test for row in rows for test in cells[row]["tests"]]
    assert len(tests) >= 4
    # each deployment's start sends one token, counted for its first test (a fake may be tested
    # as several deployments at once, `plugin.balance`); the tests send nothing
    assert all(test["generations"] <= 1 for test in tests), tests
    assert 1 <= sum(test["generations"] for test in tests) <= 2, tests
    for row in rows:
        assert cells[row]["outcome"] == "skipped"
        assert (
            "read-only run" in cells[row]["reason"] and "--allow-mutations" in cells[row]["reason"]
        )


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
        assert 50 < totals["coverage"]["generations"] < totals["estimated_generations"]
    assert "--budget-generations 50 covers" in done.stdout
    figure = plan["coverage_generations"]
    assert f"--budget-generations {figure} covers every capability of every target" in done.stdout
    listed = [line for line in done.stdout.splitlines() if line.startswith(("run ", "skip "))]
    assert len(listed) == len(plan["tests"])
