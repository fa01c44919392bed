"""Fake deployments forked from one already-imported process (`python -m fake_backends.zygote`)
instead of each started as `python -m fake_backends`: a run starts about twenty, and each start
spent most of its CPU importing.

A parallel run starts the zygote before it forks its test processes (`FakeLauncher.prepare`);
they inherit `current()` and ask it for deployments. A run without one (serial, or the zygote
gone) starts `python -m fake_backends` as before: the deployment is the same either way.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from ..errors import LaunchError

START_TIMEOUT_S = 30.0
"""How long the zygote may take to answer a request with the forked child's pid."""
STOP_TIMEOUT_S = 5.0


class ForkedFake:
    """A deployment the zygote forked, with the part of `subprocess.Popen` the fake launcher
    uses: `args`, `stdout`, `returncode`, `poll`, `wait`, `send_signal`, `kill`. Its exit status
    is the zygote's last message on the deployment's connection."""

    def __init__(self, args: list[str], conn: socket.socket, pid: int, stdout: IO[bytes]) -> None:
        self.args = args
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._conn = conn

    def poll(self) -> int | None:
        if self.returncode is None and _readable(self._conn, 0.0):
            self._read_exit()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not _readable(self._conn, timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._read_exit()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read_exit(self) -> None:
        try:
            message = json.loads(self._conn.recv(4096) or b"null")
        except (OSError, ValueError):
            message = None
        code = message.get("exit") if isinstance(message, dict) else None
        # no exit message: the zygote itself is gone, and took its children with it
        self.returncode = code if isinstance(code, int) else -signal.SIGTERM
        self._conn.close()


def _readable(conn: socket.socket, timeout_s: float | None) -> bool:
    poller = select.poll()
    poller.register(conn, select.POLLIN)
    return bool(poller.poll(None if timeout_s is None else math.ceil(timeout_s * 1000)))


class FakeZygote:
    """A running `python -m fake_backends.zygote`, reached at `path`."""

    def __init__(self, process: subprocess.Popen[bytes], path: Path, lifeline: int) -> None:
        self.process = process
        self.path = path
        self._lifeline = lifeline
        self._owner = os.getpid()

    @classmethod
    def start(cls) -> FakeZygote:
        """Raises OSError where it cannot start (a socket path longer than the platform allows,
        no Unix sockets): the caller goes on without it."""
        directory = Path(tempfile.mkdtemp(prefix="rl-fake-zygote-"))
        path = directory / "socket"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        read_end, write_end = os.pipe()
        try:
            listener.bind(str(path))
            listener.listen(64)
            process = subprocess.Popen(
                [sys.executable, "-m", "fake_backends.zygote", "--lifeline-fd", str(read_end)],
                stdin=listener.fileno(),
                stdout=subprocess.DEVNULL,
                pass_fds=(read_end,),
                # a terminal's interrupt reaches the run's process group, not the zygote and its
                # fakes: the run stops its deployments itself, as it does every other
                process_group=0,
            )
        except OSError:
            os.close(write_end)
            shutil.rmtree(directory, ignore_errors=True)
            raise
        finally:
            listener.close()
            os.close(read_end)
        os.set_inheritable(write_end, False)
        return cls(process, path, write_end)

    def alive(self) -> bool:
        """In the process that started it, whether it runs; elsewhere (a forked test process
        cannot wait for it) assumed, since a start it no longer answers falls back anyway."""
        return os.getpid() != self._owner or self.process.poll() is None

    def spawn(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        stderr: IO[bytes],
    ) -> ForkedFake:
        """`python -m fake_backends ARGV` forked from the zygote: stdout a pipe to read its ready
        line from, stderr `stderr`, stdin /dev/null."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        read_end, write_end = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            conn.settimeout(START_TIMEOUT_S)
            conn.connect(str(self.path))
            request = {"argv": list(argv), "env": dict(env), "cwd": os.getcwd()}
            descriptors = [null, write_end, stderr.fileno()]
            socket.send_fds(conn, [json.dumps(request).encode()], descriptors)
            answer = json.loads(conn.recv(4096) or b"null")
            conn.settimeout(None)
        except (OSError, ValueError) as exc:
            conn.close()
            os.close(read_end)
            raise LaunchError(
                f"the fake zygote at {self.path} did not start a deployment: {exc}"
            ) from exc
        finally:
            os.close(write_end)
            os.close(null)
        if not isinstance(answer, dict) or not isinstance(answer.get("pid"), int):
            conn.close()
            os.close(read_end)
            raise LaunchError(f"the fake zygote at {self.path} answered {answer!r}")
        args = [sys.executable, "-m", "fake_backends", *argv]
        return ForkedFake(args, conn, answer["pid"], os.fdopen(read_end, "rb"))

    def stop(self) -> None:
        """Only the process that started it stops it; its test processes leave it running.
        Closing the lifeline ends it once no test process holds the pipe any more; past
        `STOP_TIMEOUT_S` it is terminated (it terminates its fakes first), then killed."""
        if os.getpid() != self._owner:
            return
        with contextlib.suppress(OSError):
            os.close(self._lifeline)
        for end in (None, self.process.terminate, self.process.kill):
            if end is not None:
                end()
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(OSError):
            self.path.unlink()
            self.path.parent.rmdir()


_current: FakeZygote | None = None


def current() -> FakeZygote | None:
    """The run's zygote, while it is alive."""
    return _current if _current is not None and _current.alive() else None


def started(stack: contextlib.ExitStack) -> FakeZygote | None:
    """The run's zygote, started on first call and stopped when `stack` closes; None where it
    cannot start (each fake then starts as `python -m fake_backends`)."""
    global _current
    if _current is None or not _current.alive():
        try:
            _current = FakeZygote.start()
        except OSError:
            return None
        stack.callback(_stop_current)
    return _current


def _stop_current() -> None:
    global _current
    zygote, _current = _current, None
    if zygote is not None:
        zygote.stop()
