"""A dead, wedged or hostile deployment ends the run in bounded time with an honest matrix: each
run finishes within 2 x deadline + 30 s, exits non-zero, writes a matrix in which no cell passes
and every failed or errored cell says why, and prints no traceback.

The wall time of each mode at the default 30 s deadline is measured by
`python benchmarks/hostile_deployments.py`, not here."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_backends.deployment.hostile import MODES, hostile_server

pytestmark = pytest.mark.slow
DEADLINE_S = 3.0


@pytest.mark.parametrize("mode", MODES)
def test_a_hostile_deployment_ends_the_run_in_bounded_time(mode: str, tmp_path: Path) -> None:
    with hostile_server(mode) as url:
        command = [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "--frontend",
            url,
            "--rl-url",
            url,
            "--backend",
            "vllm",
            "--model",
            "toy",
            "--deadline",
            str(DEADLINE_S),
            "--examples",
            "2",
            "--report-dir",
            str(tmp_path),
        ]
        started = time.monotonic()
        run = subprocess.run(command, capture_output=True, text=True, timeout=300)
        elapsed = time.monotonic() - started
    assert elapsed < 2 * DEADLINE_S + 30, elapsed
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Traceback" not in run.stdout + run.stderr
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    cells = [cell for row in matrix["capabilities"] for cell in row["cells"].values()]
    assert not [cell for cell in cells if cell["outcome"] == "pass"]
    judged = [cell for cell in cells if cell["outcome"] in ("fail", "error")]
    assert judged and all(cell["reason"] for cell in judged)
