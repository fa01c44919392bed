"""The console: a progress line whenever the run reaches another target or contract area (done
out of total), then the grid and the summary; `-q` prints those only; in a CI log every failing
cell's cause whole."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
CAPABILITIES = ("--capability", "discovery.schema", "--capability", "logprobs.selected_alignment")


def run(tmp_path: Path, *flags: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "--fake",
            "vllm",
            *CAPABILITIES,
            "--report-dir",
            str(tmp_path),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_progress_names_target_area_and_count(tmp_path: Path) -> None:
    out = run(tmp_path)
    assert "[0/2] fake-vllm: discovery" in out
    assert "[1/2] fake-vllm: logprobs" in out
    assert out.index("[1/2]") < out.index("capability  ")


def test_quiet_prints_the_table_without_progress(tmp_path: Path) -> None:
    out = run(tmp_path, "-q")
    assert "[0/2]" not in out
    assert re.search(r"^discovery\.schema +MUST +pass$", out, re.MULTILINE), out
    assert "passed" not in out  # the counts are the matrix's cells, not pytest's tests
    assert "cells: 2 pass, 0 fail, 0 error (2 x 1)" in out


def test_a_ci_log_names_each_failing_cells_cause_whole_and_annotates_it(tmp_path: Path) -> None:
    """stdout not a terminal (every CI log): a failing cell's reason is wrapped, never cut; on
    GitHub Actions it is also an `::error` annotation."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "--fake",
            "vllm",
            "--jobs",
            "1",
            "--fault",
            "prompt_logprobs_shifted_by_one",
            "--capability",
            "refresh.served_policy_verified",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "GITHUB_ACTIONS": "true"},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    reason = matrix["capabilities"][0]["cells"]["fake-vllm"]["reason"]
    assert len(reason) > 150  # longer than a line: the case the log used to cut
    out = done.stdout
    start = out.index("FAIL refresh.served_policy_verified on fake-vllm: ")
    block = out[start:].split("\ncells: ", 1)[0]
    assert " ".join(block.split()).endswith(" ".join(reason.split()))
    assert " ..." not in block
    # run in the checkout: the annotation names the suite file of the cell's test
    annotation = (
        "::error file=suites/test_refresh_served_weights.py,title=FAIL "
        "refresh.served_policy_verified on fake-vllm::" + " ".join(reason.split())
    )
    assert annotation in out.splitlines()
