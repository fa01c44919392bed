"""The `rl-conformance` command's exit (`cli.command`): once `main` returned, the process ends
without the interpreter's teardown, but only after what a normal exit guarantees: exit handlers
run, every byte written to the standard streams delivered, the status kept; with another thread
still running it waits for that thread, as a normal exit does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PRELUDE = "import atexit, sys, threading, time\nfrom rl_conformance.cli import command\n"


def run(body: str, *argv: str) -> subprocess.CompletedProcess[str]:
    script = PRELUDE + body + f"\nsys.argv = ['rl-conformance', *{list(argv)!r}]\ncommand()\n"
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )


def test_exit_handlers_run_and_the_output_arrives_whole(tmp_path: Path) -> None:
    marker = tmp_path / "handler-ran"
    done = run(f"atexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))", "capabilities")
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "ran"
    in_process = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom rl_conformance.cli import main\nsys.exit(main(['capabilities']))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout == in_process.stdout and len(done.stdout) > 1000


def test_the_status_is_mains() -> None:
    assert run("", "run", "--capability", "no.such.capability").returncode == 2
    assert run("", "--version").returncode == 0


def test_a_thread_still_running_is_waited_for(tmp_path: Path) -> None:
    marker = tmp_path / "thread-finished"
    body = (
        "def late():\n"
        "    time.sleep(0.3)\n"
        f"    open({str(marker)!r}, 'w').write('done')\n"
        "threading.Thread(target=late).start()"
    )
    assert run(body, "--version").returncode == 0
    assert marker.read_text() == "done"


def with_reader_gone(argv: list[str], cwd: Path) -> tuple[int, str]:
    """`rl-conformance ARGV | head -0`: the reader of its standard output is gone before the
    command writes its first byte (closed at once; the command takes longer than that to
    start), so every write meets a closed pipe."""
    process = subprocess.Popen(
        [sys.executable, "-m", "rl_conformance", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    code = process.wait(timeout=300)
    return code, process.stderr.read().decode()


def test_a_closed_pipe_ends_the_command_quietly_with_141(tmp_path: Path) -> None:
    """As `yes | head -1` ends `yes`: no BrokenPipeError, no traceback, status 128 + SIGPIPE."""
    code, err = with_reader_gone(["capabilities"], tmp_path)
    assert code == 141
    assert err == ""


@pytest.mark.slow
def test_a_run_whose_output_pipe_closed_still_writes_its_report(tmp_path: Path) -> None:
    argv = ["run", "--jobs", "1", "--fake", "vllm", "--capability", "discovery.schema"]
    code, err = with_reader_gone([*argv, "--report-dir", "report"], tmp_path)
    assert code == 141, err[-2000:]
    assert "Traceback" not in err and "internal error" not in err
    assert json.loads((tmp_path / "report" / "matrix.json").read_text())["complete"] is True
