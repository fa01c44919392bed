"""The `rl-conformance` command's exit (`cli.command`): once `main` returned, the process ends
without the interpreter's teardown, but only after what a normal exit guarantees: exit handlers
run, every byte written to the standard streams delivered, the status kept; with another thread
still running it waits for that thread, as a normal exit does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
