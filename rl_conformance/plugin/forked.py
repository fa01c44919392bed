"""A parallel run by fork (`rl-conformance run --jobs N` on POSIX): the run's process imports
and collects once, then forks a child per group of tests (`balance`: one per target, several
for a target cheap to start again; at most N at a time). A child runs its
target's tests in order, exactly as a serial run would, and sends each test's report (pytest's
own serialisation, the record riding in `user_properties`) and the targets it reached through a
pipe; the parent replays the reports to its hooks, so the console, the records and the matrix
are those of a serial run. A child costs a `fork`, not a new interpreter that imports the
harness and collects the suites again (what pytest-xdist workers do, `distribution`).

An interrupt of the parent (Ctrl-C, SIGTERM, `--run-timeout`) is passed to the children, which
stop their test, stop their deployments and report before exiting; their reports so far count.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

FORKED_CHILD: pytest.StashKey[bool] = pytest.StashKey()
FORK_PARENT: pytest.StashKey[bool] = pytest.StashKey()
CHILD_EXIT_GRACE_S = 20.0


def available() -> bool:
    return hasattr(os, "fork")


class Child:
    """One forked child: its pid and the read end of its pipe."""

    def __init__(self, pid: int, reader: int) -> None:
        self.pid = pid
        self.reader = reader
        self.buffer = b""

    def interrupt(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGINT)

    def reap(self) -> int:
        """The child's exit code (0 when it was already reaped)."""
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return 0
        return os.waitstatus_to_exitcode(status)


def run_children(
    groups: list[list[pytest.Item]],
    jobs: int,
    run_group: Callable[[list[pytest.Item], Callable[[dict[str, Any]], None]], None],
    receive: Callable[[dict[str, Any]], None],
) -> None:
    """Fork a child per group (at most `jobs` alive), each running `run_group(items, send)`;
    hand every message a child sends to `receive` as it arrives. Returns when every child has
    exited; on KeyboardInterrupt the children are interrupted, drained (bounded: a message
    with `grace_s` extends the bound to that many seconds from its arrival, for a child
    putting a fleet back) and the interrupt is raised again."""
    pending = list(groups)
    running: dict[int, Child] = {}
    selector = selectors.DefaultSelector()
    extended_until = 0.0

    def deliver(message: dict[str, Any]) -> None:
        nonlocal extended_until
        if isinstance(message.get("grace_s"), (int, float)):
            extended_until = max(extended_until, time.monotonic() + message["grace_s"])
        receive(message)

    def start(group: list[pytest.Item]) -> None:
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            os.close(reader)
            selector.close()
            code = 0
            try:
                with os.fdopen(writer, "wb", buffering=0) as pipe:

                    def send(message: dict[str, Any]) -> None:
                        pipe.write(json.dumps(message, default=str).encode() + b"\n")

                    run_group(group, send)
            except BaseException:  # a child never returns into the parent's code
                code = 1
            finally:
                os._exit(code)
        os.close(writer)
        child = Child(pid, reader)
        running[reader] = child
        selector.register(reader, selectors.EVENT_READ, child)

    def pump(timeout: float | None) -> None:
        for key, _ in selector.select(timeout):
            child: Child = key.data
            chunk = os.read(child.reader, 1 << 16)
            if not chunk:
                selector.unregister(child.reader)
                os.close(child.reader)
                code = child.reap()
                del running[child.reader]
                if code != 0:
                    deliver({"kind": "crashed", "code": code})
                continue
            child.buffer += chunk
            *lines, child.buffer = child.buffer.split(b"\n")
            for line in lines:
                if line:
                    deliver(json.loads(line))

    # What the parent built (imports, collected items) is exempt from the children's garbage
    # collections: each would otherwise walk all of it, as would a full collection that
    # Hypothesis makes in every fresh process (about a tenth of a second each).
    gc.collect()
    gc.freeze()
    try:
        while pending or running:
            while pending and len(running) < jobs:
                start(pending.pop(0))
            pump(1.0)
    except KeyboardInterrupt:
        for child in running.values():
            child.interrupt()
        deadline = time.monotonic() + CHILD_EXIT_GRACE_S
        while running and time.monotonic() < max(deadline, extended_until):
            with contextlib.suppress(KeyboardInterrupt):
                pump(0.5)
        for child in list(running.values()):
            with contextlib.suppress(OSError):
                os.kill(child.pid, signal.SIGKILL)
            child.reap()
        raise
    finally:
        selector.close()
        gc.unfreeze()


def restart_capture(config: pytest.Config) -> None:
    """The child's own capture files: the parent's are shared open files after a fork."""
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is None:
        return
    with contextlib.suppress(Exception):
        capture.stop_global_capturing()
        capture.start_global_capturing()
        capture.suspend_global_capture()


def silence_terminal(config: pytest.Config) -> None:
    """The parent prints what the children report; a child prints nothing of its own."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        config.pluginmanager.unregister(reporter)


def run_items(session: pytest.Session, items: list[pytest.Item]) -> None:
    """pytest's own run loop over one group (`_pytest.main.pytest_runtestloop`, per item)."""
    for position, item in enumerate(items):
        following = items[position + 1] if position + 1 < len(items) else None
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=following)
        if session.shouldfail or session.shouldstop:
            break


def serialised(config: pytest.Config, report: pytest.TestReport) -> dict[str, Any]:
    data: dict[str, Any] = config.hook.pytest_report_to_serializable(config=config, report=report)
    return data


def replayed(config: pytest.Config, data: dict[str, Any]) -> Any:
    return config.hook.pytest_report_from_serializable(config=config, data=data)
