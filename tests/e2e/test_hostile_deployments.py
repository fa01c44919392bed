"""A dead, wedged or hostile deployment ends the run in bounded time with an honest matrix: each
run finishes within 2 x deadline + 30 s, exits non-zero, writes a matrix in which no cell passes
(but the rows that read only a wedged deployment's worker list, which it still answers) and every
failed or errored cell says why, and prints no traceback.

The wall time of each mode at the default 30 s deadline is measured by
`python benchmarks/hostile_deployments.py`, not here."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fake_backends.deployment.hostile import MODES, hostile_server

pytestmark = pytest.mark.slow
DEADLINE_S = 3.0


CONCURRENT_RUNS = 4
LISTENER_ONLY = {"discovery.protocol_version", "discovery.schema"}
"""Rows that read nothing but the RL listener's worker list, which a wedged deployment still
answers (an empty, well-formed one): they may pass."""
"""The modes are independent runs that mostly wait on their deadlines: a few at a time."""


def run_against(mode: str, directory: Path) -> dict[str, Any]:
    # The frontend and the RL listener are two listeners (one URL for both is a wrong input,
    # refused before anything starts): both behave this way.
    with hostile_server(mode) as url, hostile_server(mode) as rl_url:
        command = [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "--frontend",
            url,
            "--rl-url",
            rl_url,
            "--backend",
            "vllm",
            "--model",
            "toy",
            "--deadline",
            str(DEADLINE_S),
            "--examples",
            "2",
            "--report-dir",
            str(directory),
        ]
        started = time.monotonic()
        run = subprocess.run(command, capture_output=True, text=True, timeout=300)
        elapsed = time.monotonic() - started
    matrix_path = directory / "matrix.json"
    return {
        "elapsed": elapsed,
        "run": run,
        "matrix": json.loads(matrix_path.read_text()) if matrix_path.exists() else None,
    }


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=CONCURRENT_RUNS) as pool:
        futures = {
            mode: pool.submit(run_against, mode, tmp_path_factory.mktemp(f"hostile-{mode}"))
            for mode in MODES
        }
        return {mode: future.result() for mode, future in futures.items()}


@pytest.mark.parametrize("mode", MODES)
def test_a_hostile_deployment_ends_the_run_in_bounded_time(
    mode: str, outcomes: dict[str, dict[str, Any]]
) -> None:
    found = outcomes[mode]
    run, elapsed = found["run"], found["elapsed"]
    assert elapsed < 2 * DEADLINE_S + 30, elapsed
    matrix = found["matrix"]
    kinds = {t.get("unreached_kind") for t in matrix["targets"]} if matrix else set()
    # a frontend that is not a Dynamo frontend (a page, a redirect, no model listing) is an
    # input the preflight refuses (2); one that does not answer is not reached (3)
    expected = 2 if "preflight refused" in kinds else 3 if kinds - {None} else 1
    assert run.returncode == expected, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Traceback" not in run.stdout + run.stderr
    assert matrix is not None, run.stderr[-2000:]
    cells = [cell for row in matrix["capabilities"] for cell in row["cells"].values()]
    passing = {
        row["id"]
        for row in matrix["capabilities"]
        for cell in row["cells"].values()
        if cell["outcome"] == "pass"
    }
    assert passing <= (LISTENER_ONLY if mode == "wedged" else set()), sorted(passing)
    judged = [cell for cell in cells if cell["outcome"] in ("fail", "error")]
    assert judged and all(cell["reason"] for cell in judged)
