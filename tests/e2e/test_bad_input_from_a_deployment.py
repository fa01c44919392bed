"""Bad input from a server becomes a `fail` cell that names field, expected and observed value:
never a traceback, never an `error`, never a pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .broken_frontend import broken_frontend

pytestmark = pytest.mark.slow
CAPABILITIES = ["tokens.token_input", "tokens.completion_ids", "stream.terminal_success"]


def test_broken_deployment_gives_fail_cells_with_evidence(tmp_path: Path) -> None:
    with broken_frontend() as url:
        command = [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "-q",
            "--frontend",
            url,
            "--backend",
            "vllm",
            "--report-dir",
            str(tmp_path),
            "--examples",
            "2",
            "--deadline",
            "5",
        ]
        for capability in CAPABILITIES:
            command += ["--capability", capability]
        run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    cells = {row["id"]: row["cells"]["external-vllm"] for row in matrix["capabilities"]}
    assert {cells[c]["outcome"] for c in CAPABILITIES} == {"fail"}
    for capability in CAPABILITIES:
        evidence = cells[capability]["evidence"]
        assert evidence, capability
        assert all(item["message"] for item in evidence)
    token_input = cells["tokens.token_input"]["evidence"]
    assert any(
        item["field"] == "choices" and item["observed"] == "not-a-list" for item in token_input
    ), token_input
    streamed = cells["stream.terminal_success"]["evidence"][0]
    assert "middle of an event" in streamed["message"]
    assert streamed["reproducer"].startswith("curl")
