"""SIGINT or SIGTERM during a run: the matrix is still written, marked incomplete, every result
observed so far kept, exit status non-zero, and no process left behind. (SIGKILL, which no
process can catch: tests/e2e/test_killed_run.py.)"""

from __future__ import annotations

import json
import os
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


# -- a stop at each instant of the command ------------------------------------------------------
# The signal is sent by the command's own process at a chosen point (a module it imports, a
# function it calls), so each instant is hit every time, however loaded the machine.

INSTANT_PRELUDE = """
import atexit, os, signal, sys

def stop(signum=signal.SIGINT):
    os.kill(os.getpid(), signum)

def stop_after(module, name, signum=signal.SIGINT, before=False, times=1):
    import importlib
    owner = importlib.import_module(module)
    path = name.split(".")
    for part in path[:-1]:
        owner = getattr(owner, part)
    original = getattr(owner, path[-1])
    calls = []
    def wrapped(*args, **kwargs):
        calls.append(1)
        if before and len(calls) == times:
            stop(signum)
        result = original(*args, **kwargs)
        if not before and len(calls) == times:
            stop(signum)
        return result
    setattr(owner, path[-1], wrapped)

class StopOnImport:
    def __init__(self, name):
        self.name = name
    def find_spec(self, name, path=None, target=None):
        if name == self.name:
            sys.meta_path.remove(self)
            stop()
        return None
"""
QUICK_RUN = ["run", "--fake", "vllm", "--jobs", "1", "--capability", "discovery.schema"]
INSTANTS = {
    "importing a command": "sys.meta_path.insert(0, StopOnImport('rl_conformance.cli.run'))",
    "starting the fakes' zygote, before pytest": (
        "stop_after('rl_conformance.launchers.plan', 'TargetPool.prepare')"
    ),
    "collecting the suites": (
        "stop_after('rl_conformance.plugin.session', "
        "'ConformanceRun.pytest_collection_modifyitems', before=True)"
    ),
    "testing": "stop_after('rl_conformance.plugin.session', 'ConformanceRun._add_record')",
    "testing, twice": (
        "stop_after('rl_conformance.plugin.session', 'ConformanceRun._add_record')\n"
        "stop_after('rl_conformance.plugin.session', 'write_reports', before=True)"
    ),
    "testing, in a finaliser": (  # where an exception cannot rise: the stop must not be lost
        "class Doomed:\n"
        "    def __del__(self):\n"
        "        stop()\n"
        "        sum(range(100))\n"
        "import rl_conformance.plugin.session as session\n"
        "kept = session.ConformanceRun._add_record\n"
        "def add_record(self, *args):\n"
        "    kept(self, *args)\n"
        "    Doomed()\n"
        "session.ConformanceRun._add_record = add_record\n"
    ),
    "writing the reports": (
        "stop_after('rl_conformance.plugin.session', 'write_reports', before=True)"
    ),
    "sealing the bundle, after the reports": (
        "stop_after('rl_conformance.reports.evidence', 'seal', before=True)"
    ),
    "exiting": "atexit.register(stop)",
}
STOPPED_BEFORE_THE_REPORT = {
    "importing a command",
    "starting the fakes' zygote, before pytest",
    "collecting the suites",
}
"""Nothing was written yet, so nothing is: no report directory."""
WRITTEN_WHOLE = {"writing the reports", "sealing the bundle, after the reports", "exiting"}
"""Every test had run: the report says so (complete), and the command still exits 130."""


def run_stopped(tmp_path: Path, setup: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    script = (
        INSTANT_PRELUDE
        + setup
        + f"\nsys.argv = ['rl-conformance', *{argv!r}]\n"
        + "from rl_conformance.cli import command\ncommand()\n"
    )
    marker = f"rl-conformance-instant-{tmp_path.name}"
    env = dict(os.environ, RL_CONFORMANCE_TEST_INSTANT=marker)
    try:
        return subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
            cwd=tmp_path,
            check=False,
        )
    finally:
        time.sleep(0.5)
        assert not processes_marked(marker), "a process of the stopped run was left behind"


def processes_marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if marker.encode() in environ and "zombie" not in status.lower():
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("instant", INSTANTS)
def test_ctrl_c_at_any_instant_exits_130_in_one_line(tmp_path: Path, instant: str) -> None:
    report = tmp_path / "report"
    done = run_stopped(tmp_path, INSTANTS[instant], [*QUICK_RUN, "--report-dir", str(report)])
    said = (done.stdout + done.stderr).replace(str(tmp_path), "DIR")
    assert done.returncode == 130, said[-3000:]
    for word in ("Traceback", "KeyboardInterrupt", "pytest", "Exception ignored"):
        assert word not in said, said[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("rl-conformance: "), done.stderr[-2000:]
    if instant in STOPPED_BEFORE_THE_REPORT:
        assert not (report / "matrix.json").exists()
        assert last == "rl-conformance: interrupted"
        return
    matrix = json.loads((report / "matrix.json").read_text())
    assert matrix["complete"] is (instant in WRITTEN_WHOLE)
    if not matrix["complete"]:
        assert matrix["incomplete_reason"] == "SIGINT: the run was interrupted (Ctrl-C)"
        assert last.startswith("rl-conformance: incomplete run (SIGINT")
    assert (report / "bundle.json").is_file()  # sealed even when the stop came meanwhile


def test_sigterm_before_pytest_exits_143(tmp_path: Path) -> None:
    setup = "stop_after('rl_conformance.launchers.plan', 'TargetPool.prepare', signal.SIGTERM)"
    done = run_stopped(tmp_path, setup, [*QUICK_RUN, "--report-dir", str(tmp_path / "report")])
    assert done.returncode == 143, done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "argv", [["capabilities"], ["diff", "--help"]], ids=["capabilities", "diff-help"]
)
def test_ctrl_c_in_any_command_exits_130(tmp_path: Path, argv: list[str]) -> None:
    done = run_stopped(tmp_path, "sys.meta_path.insert(0, StopOnImport('argparse'))", argv)
    assert done.returncode == 130, done.stderr[-2000:]
    assert done.stderr == "rl-conformance: interrupted\n"
