"""``python -m fake_backends.zygote --lifeline-fd N``: start fake deployments by forking one
process that has already imported them.

A default run starts a fake deployment about twenty times (one per group of tests, and one cold
start per checkpoint in the served-policy test), and each ``python -m fake_backends`` spends most
of its start importing. The zygote imports once; for each request it forks a child that runs
``fake_backends.__main__.main`` as ``python -m fake_backends`` would, with the caller's argv,
environment, working directory and standard streams. It never starts a thread or an event loop,
so forking it is safe.

Its standard input is a listening ``AF_UNIX`` ``SOCK_SEQPACKET`` socket; one connection per
deployment, each message one packet:

* the caller sends ``{"argv": [...], "env": {...}, "cwd": "..."}`` with three file descriptors
  (the child's stdin, stdout and stderr);
* the zygote answers ``{"pid": N}`` once forked, or ``{"error": "..."}``;
* when the child exits it sends ``{"exit": code}`` (``-N`` for signal N) and closes;
* a caller that closes its connection first takes its child with it (SIGTERM): a test process
  that died leaves no deployment behind.

File descriptor N (``--lifeline-fd``) is the read end of a pipe the run holds: when the run has
gone, the zygote terminates its children and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from dataclasses import dataclass, field

MAX_PACKET = 1 << 20
LISTENER_FD = 0


@dataclass
class Child:
    pid: int
    pidfd: int
    conn: socket.socket


@dataclass
class Zygote:
    listener: socket.socket
    lifeline: int
    poller: select.poll = field(default_factory=select.poll)
    waiting: dict[int, socket.socket] = field(default_factory=dict)
    """Connections whose request has not come yet, by descriptor."""
    by_pidfd: dict[int, Child] = field(default_factory=dict)
    by_conn: dict[int, Child] = field(default_factory=dict)

    def serve(self) -> None:
        self.poller.register(self.listener, select.POLLIN)
        self.poller.register(self.lifeline, select.POLLIN)
        while True:
            for fd, _events in self.poller.poll():
                if fd == self.lifeline:
                    self.stop()
                elif fd == self.listener.fileno():
                    conn, _ = self.listener.accept()
                    self.waiting[conn.fileno()] = conn
                    self.poller.register(conn, select.POLLIN)
                elif fd in self.by_pidfd:
                    self.reap(self.by_pidfd.pop(fd))
                elif fd in self.by_conn:
                    # the caller closed first: its child goes too, reaped when it has
                    child = self.by_conn.pop(fd)
                    self.poller.unregister(fd)
                    with contextlib.suppress(OSError):
                        os.kill(child.pid, signal.SIGTERM)
                elif fd in self.waiting:
                    self.poller.unregister(fd)
                    self.spawn(self.waiting.pop(fd))

    def spawn(self, conn: socket.socket) -> None:
        try:
            data, fds, _flags, _address = socket.recv_fds(conn, MAX_PACKET, 3)
        except OSError:
            conn.close()
            return
        try:
            request = json.loads(data)
            if len(fds) != 3 or not isinstance(request, dict):
                raise ValueError(f"expected a JSON object and 3 descriptors, got {len(fds)}")
            argv = [str(arg) for arg in request["argv"]]
            env = {str(key): str(value) for key, value in request["env"].items()}
            cwd = str(request["cwd"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):
                conn.send(json.dumps({"error": f"unusable request: {exc}"}).encode())
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            become_fake(argv, env, cwd, fds)
        for fd in fds:
            os.close(fd)
        child = Child(pid, os.pidfd_open(pid), conn)
        self.by_pidfd[child.pidfd] = child
        self.by_conn[conn.fileno()] = child
        self.poller.register(child.pidfd, select.POLLIN)
        self.poller.register(conn, select.POLLIN)
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"pid": pid}).encode())

    def reap(self, child: Child) -> None:
        _, status = os.waitpid(child.pid, 0)
        self.poller.unregister(child.pidfd)
        os.close(child.pidfd)
        if self.by_conn.pop(child.conn.fileno(), None) is not None:
            self.poller.unregister(child.conn)
        with contextlib.suppress(OSError):
            child.conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
        child.conn.close()

    def stop(self, *_: object) -> None:
        for child in self.by_pidfd.values():
            with contextlib.suppress(OSError):
                os.kill(child.pid, signal.SIGTERM)
        os._exit(0)


def become_fake(argv: list[str], env: dict[str, str], cwd: str, fds: list[int]) -> None:
    """In the forked child: the caller's streams, environment and directory, then the fake's own
    main. Never returns into the zygote's loop."""
    code = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.argv = ["python -m fake_backends", *argv]
        from fake_backends.__main__ import main as fake_main

        code = fake_main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fake_backends.zygote")
    parser.add_argument(
        "--lifeline-fd",
        type=int,
        required=True,
        help="read end of a pipe the caller holds: the zygote exits when it closes",
    )
    args = parser.parse_args(argv)
    import fake_backends.__main__  # noqa: F401  (what every child would import)

    zygote = Zygote(socket.socket(fileno=LISTENER_FD), args.lifeline_fd)
    signal.signal(signal.SIGTERM, zygote.stop)
    # the run stops its deployments itself, and the zygote goes when the run has gone
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    zygote.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
