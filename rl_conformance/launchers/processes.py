"""Child processes that are always stopped: each runs in its own session (process group), logs
to a file, and `stop()` signals the whole group, escalating to SIGKILL after a grace period."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

GRACE_S = 8.0

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
"""Terminal colour codes in a process's log (Dynamo's logger writes them): noise in a report."""


@dataclass
class ManagedProcess:
    name: str
    command: list[str]
    env: dict[str, str]
    log_path: Path
    cwd: Path | None = None
    priority: int = 0
    """A nice value to ask for (negative: ahead of other work), where the user may set it."""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        if self.priority:
            _ask_priority(self.process.pid, self.priority)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def exited(self) -> int | None:
        """The exit code if the process has ended, else None."""
        return None if self.process is None else self.process.poll()

    def log_tail(self, limit: int = 3000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return "(no log)"
        return ANSI_ESCAPE.sub("", data[-limit:].decode("utf-8", errors="replace"))

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait(timeout=5)

    def kill(self) -> None:
        """SIGKILL the process group at once, as a node failure or the OOM killer would."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        _signal_group(process, signal.SIGKILL)
        process.wait(timeout=5)

    def describe(self) -> str:
        return f"{self.name}: {' '.join(self.command)}"


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        return


def free_port(host: str = "127.0.0.1") -> int:
    """A currently free TCP port on `host` (for programs that cannot report the one they bound)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ask_priority(pid: int, nice: int) -> None:
    """Best effort: only a privileged user may raise a priority; otherwise it stays as it is."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except (OSError, AttributeError):
        return
