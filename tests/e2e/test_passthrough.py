"""Engine faults through the real Dynamo frontend: every fault the frontend lets through to a
trainer must be caught by the suite at the response level."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fake_backends.faults.engine import ENGINE_FAULT_NAMES

pytestmark = pytest.mark.slow


def test_every_passed_through_engine_fault_is_caught(dynamo_python: Path, tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "passthrough",
            "--report-dir",
            str(tmp_path),
            "--dynamo-python",
            str(dynamo_python),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = json.loads((tmp_path / "passthrough.json").read_text())
    assert report["dynamo_version"] == "1.6.1"
    assert [row["fault"] for row in report["faults"]] == list(ENGINE_FAULT_NAMES)
    assert report["holes"] == [], run.stdout[-4000:]
    assert run.returncode == 0
    markdown = (tmp_path / "passthrough.md").read_text()
    assert all(f"`{name}`" in markdown for name in ENGINE_FAULT_NAMES)
    passed = [row for row in report["faults"] if row["passed_through"]]
    assert passed, "no engine fault reached the client: the probes observe nothing"
