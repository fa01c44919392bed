"""The shipped nightly recipes as they run: the GitHub workflow's comparison step, executed by
bash as the runner would (first night with a known failure, a night with a regression, the night
it is fixed), and the Kubernetes CronJob's script, executed by sh with the CLI in place of the
cluster's image."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
NIGHTLY = ROOT / "deploy" / "github-actions" / "nightly.yml"
CRONJOB = ROOT / "deploy" / "kubernetes" / "conformance-cronjob.yaml"


def matrix(outcomes: dict[str, str], *, complete: bool = True) -> dict[str, Any]:
    failing = sum(outcome in ("fail", "error") for outcome in outcomes.values())
    return {
        "complete": complete,
        "exit_status": 1 if failing or not complete else 0,
        "summary": {"fail": failing, "error": 0},
        "targets": [{"id": "docker-vllm"}],
        "capabilities": [
            {"id": capability, "cells": {"docker-vllm": {"outcome": outcome, "reason": outcome}}}
            for capability, outcome in outcomes.items()
        ],
    }


def cli_wrapper(directory: Path) -> None:
    """`.venv/bin/rl-conformance` as the workflow's install step leaves it."""
    binary = directory / ".venv" / "bin"
    binary.mkdir(parents=True, exist_ok=True)
    wrapper = binary / "rl-conformance"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rl_conformance "$@"\n')
    wrapper.chmod(0o755)


def step(name: str) -> str:
    workflow = yaml.safe_load(NIGHTLY.read_text())
    (found,) = [s for s in workflow["jobs"]["conformance"]["steps"] if s.get("name") == name]
    return str(found["run"])


def night(workspace: Path, outcomes: dict[str, str]) -> tuple[int, str]:
    report = workspace / "conformance-report"
    report.mkdir(exist_ok=True)
    (report / "matrix.json").write_text(json.dumps(matrix(outcomes)))
    summary = workspace / "summary.md"
    summary.write_text("")
    done = subprocess.run(
        ["bash", "-e", "-c", step("Compare with the baseline")],
        cwd=workspace,
        env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, summary.read_text()


def kept(workspace: Path) -> dict[str, str]:
    document = json.loads((workspace / "baseline" / "matrix.json").read_text())
    return {row["id"]: row["cells"]["docker-vllm"]["outcome"] for row in document["capabilities"]}


def test_the_workflow_keeps_a_first_night_with_a_known_failure_and_reports_each_regression(
    tmp_path: Path,
) -> None:
    cli_wrapper(tmp_path)
    first = {"tokens.token_input": "pass", "stream.done_last": "fail", "logprobs.x": "pass"}
    status, summary = night(tmp_path, first)
    assert status == 1 and "No baseline yet" in summary
    assert kept(tmp_path) == first  # kept whatever its outcomes

    status, summary = night(tmp_path, first)  # the known failure again: not a regression
    assert status == 0, summary
    assert "0 regression(s)" in summary

    regressed = first | {"logprobs.x": "fail"}
    for _ in range(2):  # reported every night until fixed
        status, summary = night(tmp_path, regressed)
        assert status == 1 and "Regressions (1)" in summary and "logprobs.x" in summary
        assert kept(tmp_path) == first

    fixed = first | {"stream.done_last": "pass"}
    status, summary = night(tmp_path, fixed)
    assert status == 0, summary
    assert kept(tmp_path) == fixed


def test_the_baseline_is_saved_whatever_the_job_outcome() -> None:
    workflow = yaml.safe_load(NIGHTLY.read_text())
    (save,) = [
        s for s in workflow["jobs"]["conformance"]["steps"] if s.get("name") == "Save the baseline"
    ]
    assert "success()" not in save["if"] and "always()" in save["if"]


def test_the_cronjob_script_runs_diffs_and_keeps_its_baseline_on_the_volume(
    tmp_path: Path,
) -> None:
    """The CronJob's shell script with `rl-conformance run` standing in for a real run: each
    run gets its own directory on the volume, the comparison reads and keeps the baseline
    there, and the pod exits with the comparison's status."""
    document = next(d for d in yaml.safe_load_all(CRONJOB.read_text()) if d["kind"] == "CronJob")
    container = document["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["sh", "-c"]
    script = container["command"][2]
    reports = tmp_path / "reports"
    reports.mkdir()
    binary = tmp_path / "bin"
    binary.mkdir()
    stand_in = binary / "rl-conformance"
    outcomes = tmp_path / "outcomes.json"
    stand_in.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = run ]; then\n'
        '  while [ "$1" != --report-dir ]; do shift; done\n'
        f'  mkdir -p "$2" && cp "{outcomes}" "$2/matrix.json"; exit 1\n'
        "fi\n"
        f'exec "{sys.executable}" -m rl_conformance "$@"\n'
    )
    stand_in.chmod(0o755)

    def run_once(cells: dict[str, str], pod: str) -> int:
        outcomes.write_text(json.dumps(matrix(cells)))
        script_here = script.replace("/reports", str(reports))
        done = subprocess.run(
            ["sh", "-c", script_here],
            env={**os.environ, "PATH": f"{binary}:{os.environ['PATH']}", "HOSTNAME": pod},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return done.returncode

    first = {"a": "pass", "b": "fail"}
    assert run_once(first, "pod-1") == 1  # the first night's known failure
    assert run_once(first | {"a": "fail"}, "pod-2") == 1  # a regression
    assert run_once(first, "pod-3") == 0
    runs = sorted(path.name.rsplit("-", 2)[-2:][1] for path in (reports / "runs").iterdir())
    assert runs == ["1", "2", "3"]  # one directory per run, named by time and pod
    baseline = json.loads((reports / "baseline" / "matrix.json").read_text())
    assert {
        row["id"]: row["cells"]["docker-vllm"]["outcome"] for row in baseline["capabilities"]
    } == first
