"""The console: a progress line whenever the run reaches another target or contract area (done
out of total), then the grid and the summary; `-q` prints those only."""

from __future__ import annotations

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
