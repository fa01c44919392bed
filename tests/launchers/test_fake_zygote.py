"""Fake deployments forked from the zygote behave as `python -m fake_backends` does: the ready
line on stdout, the log on stderr, the exit status, SIGTERM; and nothing outlives its owner."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rl_conformance.launchers import fake_zygote
from rl_conformance.launchers.fake import FakeLauncher, _read_ready_line
from rl_conformance.launchers.fake_zygote import FakeZygote, ForkedFake


@pytest.fixture
def zygote() -> Iterator[FakeZygote]:
    started = FakeZygote.start()
    try:
        yield started
    finally:
        started.stop()
    assert started.process.returncode == 0


def spawn(zygote: FakeZygote, *argv: str) -> tuple[ForkedFake, Path]:
    with tempfile.NamedTemporaryFile(prefix="zygote-test-", suffix=".log", delete=False) as log:
        return zygote.spawn(list(argv), dict(os.environ), log), Path(log.name)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie not yet reaped is gone too
        return stat.read().split(") ")[1].startswith("Z")


def wait_gone(pid: int, deadline_s: float = 10.0) -> bool:
    ends = time.monotonic() + deadline_s
    while time.monotonic() < ends:
        if gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_forked_fake_serves_and_stops_as_a_started_one_does(zygote: FakeZygote) -> None:
    process, log = spawn(zygote, "vllm", "--host", "127.0.0.1", "--workers", "1")
    try:
        ready = json.loads(_read_ready_line(process, 30.0, str(log)))  # type: ignore[arg-type]
        assert httpx.get(ready["frontend"] + "/v1/models", timeout=10).status_code == 200
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert "fake_backends" in log.read_text()  # the child logged to the stderr it was given
    finally:
        process.kill()
        log.unlink()


def test_the_exit_status_and_stderr_of_a_fake_that_refuses_its_arguments(
    zygote: FakeZygote,
) -> None:
    process, log = spawn(zygote, "vllm", "--workers", "-1")
    running, running_log = spawn(zygote, "vllm", "--host", "127.0.0.1", "--workers", "1")
    try:
        assert process.wait(timeout=10) == 2
        assert "--workers must be >= 0" in log.read_text()
        with pytest.raises(subprocess.TimeoutExpired):
            running.wait(timeout=0.01)
        running.kill()
        assert running.wait(timeout=10) == -signal.SIGKILL
    finally:
        running.kill()
        log.unlink()
        running_log.unlink()


def test_an_unusable_request_is_answered_and_the_zygote_serves_on(zygote: FakeZygote) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.settimeout(10)
        conn.connect(str(zygote.path))
        conn.send(b"not json")
        assert "unusable request" in json.loads(conn.recv(4096))["error"]
    process, log = spawn(zygote, "vllm", "--workers", "-1")
    assert process.wait(timeout=10) == 2
    log.unlink()


def test_a_caller_that_goes_takes_its_fake_with_it(zygote: FakeZygote) -> None:
    process, log = spawn(zygote, "vllm", "--host", "127.0.0.1", "--workers", "1")
    _read_ready_line(process, 30.0, str(log))  # type: ignore[arg-type]
    process._conn.close()  # as a test process that died would
    assert wait_gone(process.pid)
    log.unlink()


def test_the_zygote_ends_with_its_run_and_takes_its_fakes(zygote: FakeZygote) -> None:
    process, log = spawn(zygote, "vllm", "--host", "127.0.0.1", "--workers", "1")
    _read_ready_line(process, 30.0, str(log))  # type: ignore[arg-type]
    zygote.stop()
    assert wait_gone(process.pid)
    assert process.wait(timeout=5) == -signal.SIGTERM  # its exit was never sent
    log.unlink()


def test_the_launcher_forks_from_the_runs_zygote_and_falls_back_without_one() -> None:
    with contextlib.ExitStack() as stack:
        launcher = FakeLauncher("vllm", workers=1)
        launcher.prepare(stack)
        zygote = fake_zygote.current()
        assert zygote is not None
        target = launcher.start()
        try:
            assert isinstance(launcher._process, ForkedFake)
            assert httpx.get(target.url("/v1/models"), timeout=10).status_code == 200
        finally:
            launcher.stop()
    assert fake_zygote.current() is None and zygote.process.returncode == 0
    launcher = FakeLauncher("vllm", workers=1)
    launcher.start()
    try:
        assert isinstance(launcher._process, subprocess.Popen)
    finally:
        launcher.stop()


def test_a_zygote_that_cannot_start_leaves_the_fakes_to_start_as_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    too_long = tmp_path / ("d" * 120)  # beyond a Unix socket path's 108 bytes
    too_long.mkdir()
    monkeypatch.setattr(fake_zygote.tempfile, "mkdtemp", lambda prefix: str(too_long))
    with contextlib.ExitStack() as stack:
        assert fake_zygote.started(stack) is None
        launcher = FakeLauncher("vllm", workers=1)
        launcher.prepare(stack)
        launcher.start()
        try:
            assert isinstance(launcher._process, subprocess.Popen)
        finally:
            launcher.stop()
    assert not too_long.exists()


def test_an_interrupt_of_the_run_leaves_the_zygote_to_end_with_it(zygote: FakeZygote) -> None:
    """A terminal's Ctrl-C goes to the run's process group, which the zygote is not in; an
    interrupt sent to it anyway is ignored once it serves."""
    assert os.getpgid(zygote.process.pid) != os.getpgid(0)
    process, log = spawn(zygote, "vllm", "--workers", "-1")
    assert process.wait(timeout=10) == 2
    zygote.process.send_signal(signal.SIGINT)
    process, _ = spawn(zygote, "vllm", "--workers", "-1")
    assert process.wait(timeout=10) == 2
    assert zygote.alive()
    log.unlink()


def test_a_zygote_whose_lifeline_another_process_holds_is_terminated_with_its_fakes(
    zygote: FakeZygote,
) -> None:
    process, log = spawn(zygote, "vllm", "--host", "127.0.0.1", "--workers", "1")
    _read_ready_line(process, 30.0, str(log))  # type: ignore[arg-type]
    holder = os.fork()  # a test process still alive holds a copy of the lifeline
    if holder == 0:
        time.sleep(30)
        os._exit(0)
    try:
        zygote.stop()
        assert zygote.process.returncode == 0  # terminated: its handler ends its fakes first
        assert wait_gone(process.pid)
    finally:
        os.kill(holder, signal.SIGKILL)
        os.waitpid(holder, 0)
        log.unlink()
