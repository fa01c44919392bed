"""SIGINT or SIGTERM during a run: the matrix is still written, marked incomplete, every result
observed so far kept, exit status non-zero, and no process left behind. (SIGKILL, which no
process can catch: tests/e2e/test_killed_run.py.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def descendants_of(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        children = children_of(frontier.pop())
        found += children
        frontier += children
    return found


def fakes_among(pids: list[int]) -> list[int]:
    found = []
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"fake_backends" in command:
            found.append(pid)
    return found


def passed_in(journal: Path) -> bool:
    """Whether the run's journal holds a passed test (a last, partial line left out)."""
    if not journal.exists():
        return False
    for line in journal.read_text().splitlines():
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if document.get("kind") == "record" and document["record"]["outcome"] == "pass":
            return True
    return False


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_writes_an_incomplete_matrix(tmp_path: Path, signum: int) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "-q",
            "--report-dir",
            str(tmp_path),
            "--examples",
            "30",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not fakes_among(descendants_of(process.pid)):
        time.sleep(0.1)
    assert fakes_among(descendants_of(process.pid)), "no fake deployment was started"
    while time.monotonic() < deadline + 60 and not passed_in(tmp_path / "records.jsonl"):
        time.sleep(0.1)  # until some test passed (its record is in the run's journal)
    launched = descendants_of(process.pid)  # a parallel run's workers and their deployments
    process.send_signal(signum)
    code = process.wait(timeout=60)
    assert code == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum]
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    assert matrix["complete"] is False
    outcomes = [cell["outcome"] for row in matrix["capabilities"] for cell in row["cells"].values()]
    assert "pass" in outcomes
    time.sleep(0.5)
    assert not [
        pid
        for pid in launched
        if Path(f"/proc/{pid}").exists()
        and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    ]


def test_run_timeout_stops_the_run_and_says_so(tmp_path: Path) -> None:
    """--run-timeout bounds the whole run: the matrix is written, incomplete, with the reason,
    and the cells not reached say it."""
    started = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "-q",
            "--report-dir",
            str(tmp_path),
            "--examples",
            "30",
            "--run-timeout",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 124  # as timeout(1) exits
    assert "--run-timeout" in run.stderr and "Traceback" not in run.stdout + run.stderr
    # a stop that was asked for, not a crash: no interrupt banner, one clear line at the end
    assert "KeyboardInterrupt" not in run.stdout + run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("rl-conformance: incomplete run (--run-timeout: the run was stopped")
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    assert matrix["complete"] is False
    assert matrix["incomplete_reason"] == "--run-timeout: the run was stopped after 4 s"
    # bounded by the run's own clock (its tests began, its report was written): a loaded
    # machine's interpreter start and collection come before the run and are not its to bound
    ran_s = (moment(matrix["finished_at"]) - moment(matrix["started_at"])).total_seconds()
    assert ran_s < 4 + 20, (ran_s, time.monotonic() - started)
    reasons = [cell["reason"] for row in matrix["capabilities"] for cell in row["cells"].values()]
    assert any(reason.startswith("not reached: --run-timeout") for reason in reasons)


def moment(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
