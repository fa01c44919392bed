"""A parallel run gives the matrix a serial run gives: every cell's outcome, reason, checks and
tests, every target's description, whether the targets run in forked children (`rl-conformance
run --jobs N`) or under pytest-xdist (`pytest -p rl_conformance.plugin -n auto`). Only what
differs from run to run anyway (ports, times, instance ids) is set aside."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.plugin.runner import suites_dir

pytestmark = pytest.mark.slow

FAKES = ("sglang", "trtllm")
PORT = re.compile(r"(127\.0\.0\.1|localhost):\d+")
NUMBER = re.compile(r"\b\d{6,}\b")  # instance ids, timestamps


def comparable(text: str) -> str:
    return NUMBER.sub("N", PORT.sub("HOST:PORT", text))


def essence(matrix: dict[str, Any]) -> dict[str, Any]:
    cells = {
        (row["id"], target): {
            "outcome": cell["outcome"],
            "reason": comparable(cell["reason"]),
            # a passed check's count depends on what the machine's pace let a test observe (a
            # request the client left before it reached a worker leaves nothing to count), a
            # failed one's does not
            "failed_checks": sorted(
                (c["id"], c["outcome"], c["count"])
                for c in cell["checks"]
                if c["outcome"] != "pass"
            ),
            "tests": sorted(
                (test["nodeid"].rsplit("/", 1)[-1], test["outcome"]) for test in cell["tests"]
            ),
            "evidence": len(cell["evidence"]),
        }
        for row in matrix["capabilities"]
        for target, cell in row["cells"].items()
    }
    targets = [
        json.loads(
            comparable(
                json.dumps({**target, "frontend_url": "", "rl_url": "", "request_trace": ""})
            )
        )
        for target in matrix["targets"]
    ]
    return {"cells": cells, "targets": targets, "summary": matrix["summary"]}


def test_parallel_runs_give_the_serial_matrix(tmp_path: Path) -> None:
    serial, parallel, forked = tmp_path / "serial", tmp_path / "parallel", tmp_path / "forked"
    fakes = [argument for fake in FAKES for argument in ("--fake", fake)]
    command = [sys.executable, "-m", "rl_conformance", "run", "-q", "--jobs", "1", "--seed", "3"]
    subprocess.run(
        [*command, *fakes, "--report-dir", str(serial)],
        capture_output=True,
        timeout=300,
        check=True,
    )
    command[command.index("--jobs") + 1] = "2"
    subprocess.run(
        [*command, *fakes, "--report-dir", str(forked)],
        capture_output=True,
        timeout=300,
        check=True,
    )
    distributed = subprocess.run(
        [sys.executable, "-m", "pytest", str(suites_dir()), "-p", "rl_conformance.plugin"]
        + ["-n", "auto", "-q", "-p", "no:cacheprovider", "--rl-seed", "3"]
        # this checkout's conftest.py (the self-tests' hypothesis profiles) is not the suites'
        + ["--confcutdir", str(suites_dir())]
        + [argument.replace("--fake", "--rl-fake") for argument in fakes]
        + ["--rl-report-dir", str(parallel)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert distributed.returncode == 0, distributed.stdout[-3000:] + distributed.stderr[-3000:]
    assert "bringing up nodes" in distributed.stdout  # it did run under xdist
    serial_matrix = json.loads((serial / "matrix.json").read_text())
    parallel_matrix = json.loads((parallel / "matrix.json").read_text())
    assert parallel_matrix["complete"] is True
    forked_matrix = json.loads((forked / "matrix.json").read_text())
    expected = essence(serial_matrix)
    for matrix in (parallel_matrix, forked_matrix):
        assert matrix["complete"] is True
        observed = essence(matrix)
        differing = {
            key: (expected["cells"].get(key), cell)
            for key, cell in observed["cells"].items()
            if expected["cells"].get(key) != cell
        }
        assert not differing, differing
        assert observed == expected
