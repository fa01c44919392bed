"""`rl-conformance certify-adapter` stopped by Ctrl-C: the scenarios that ended are judged and
written (report, records, bundle), those not run are errors, and the command exits 130 naming
the evidence files it wrote, not a placeholder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The signal is sent by the command's own process once a scenario ended, so the instant is
# the same however loaded the machine (the next scenario may start meanwhile, and then ends).
SCRIPT = """
import os, signal, sys
import rl_conformance.certify.runner as runner
kept = runner.run_scenario
ended = []
def run_scenario(*args, **kwargs):
    result = kept(*args, **kwargs)
    ended.append(result)
    if len(ended) == 1:
        os.kill(os.getpid(), signal.SIGINT)
    return result
runner.run_scenario = run_scenario
sys.argv = ["rl-conformance", *sys.argv[1:]]
from rl_conformance.cli import command
command()
"""


@pytest.mark.slow
def test_ctrl_c_keeps_what_the_ended_scenarios_judged(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    argv = ["certify-adapter", "examples.my_adapter:MyAdapter", "--jobs", "1"]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *argv, "--report-dir", "report"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 130, done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    report = tmp_path / "report"
    matrix = json.loads((report / "matrix.json").read_text())
    assert matrix["complete"] is False
    assert matrix["incomplete_reason"] == "SIGINT: the run was interrupted (Ctrl-C)"
    audits = sorted((report / "audit").iterdir())
    assert 1 <= len(audits) < 14, [path.name for path in audits]  # some ran, not all
    record = report / "validation" / "examples.my_adapter_MyAdapter.json"
    assert json.loads(record.read_text())["schema"] == "dynamo.rl.validation.v1"
    assert f"evidence: report/validation/{record.name} (dynamo.rl.validation.v1)" in done.stdout
    assert "<adapter>" not in done.stdout
    assert (report / "bundle.json").is_file()
    assert done.stderr.strip().splitlines()[-1].startswith("rl-conformance: incomplete")
