"""Real Dynamo 1.6.1 stacks for tests/dynamo: broker + real frontend + one engine.

Why this folder exists: the fake frontend in ``fake_backends`` is our reading of Dynamo; these
tests run the REAL frontend, router, nvext assembly and RL listener, started from
``.venv-dynamo`` exactly as ``rl_conformance.launchers.dynamo.DynamoLauncher`` starts them,
in front of either our toy worker (``fake_backends.dynamo.worker``) or Dynamo's own mocker.

Stacks are expensive (~1 s each), so each module shares one (``stack_fixture``), and every
stack asserts on teardown that none of its processes (or their process groups) survive.
Without a Dynamo installation the ``dynamo_python`` fixture of tests/conftest.py decides:
a loud skip on a developer machine, a failure in CI.

``DynamoLauncher`` is used with ONE change (``_LowSystemPortLauncher``): Dynamo 1.6.1 parses
``DYN_SYSTEM_PORT`` as an i16, so the ephemeral port ``free_port()`` returns (>= 32768 on
Linux) makes every worker exit at start-up with ``invalid value unsigned int ..., expected
i16 for key "SYSTEM_PORT"``.  The subclass re-picks the port below 32768; the launcher itself
needs the same fix (reported, not applied here: the launcher is not ours to edit).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_backends.dynamo.worker import LOG_REQUESTS_ENV
from rl_conformance.launchers.dynamo import DynamoLauncher
from rl_conformance.launchers.processes import ManagedProcess
from rl_conformance.model.target import Target

MAX_SYSTEM_PORT = 32767  # DYN_SYSTEM_PORT is an i16 in Dynamo 1.6.1
SYSTEM_PORT_RANGE = (20000, MAX_SYSTEM_PORT + 1)
SURVIVOR_GRACE_S = 3.0


def low_free_port() -> int:
    """A free loopback port below 32768 (what DYN_SYSTEM_PORT can hold)."""
    for _ in range(500):
        port = random.randrange(*SYSTEM_PORT_RANGE)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below 32768 on 127.0.0.1")


class _LowSystemPortLauncher(DynamoLauncher):
    """``DynamoLauncher`` with the system port fix, and request logging on in the worker."""

    def _engines(self, python: Path, model_dir: Path, env: dict[str, str]) -> list[ManagedProcess]:
        engines = super()._engines(python, model_dir, env)
        for process in engines:
            port = process.env.get("DYN_SYSTEM_PORT")
            if port is not None and int(port) > MAX_SYSTEM_PORT:
                process.env["DYN_SYSTEM_PORT"] = str(low_free_port())
            if port is not None:
                process.env[LOG_REQUESTS_ENV] = "1"
        return engines


@dataclass
class Stack:
    """One running real-Dynamo stack and small helpers to talk to it."""

    launcher: DynamoLauncher
    target: Target
    launch_to_first_200_s: float
    http: httpx.Client
    pids: list[int] = field(default_factory=list)
    exit_codes: dict[str, int | None] = field(default_factory=dict)  # filled in on stop

    @property
    def frontend(self) -> str:
        return self.target.frontend_url

    @property
    def rl(self) -> str:
        assert self.target.rl_url is not None
        return self.target.rl_url

    def post(self, path: str, body: Any, **kwargs: Any) -> httpx.Response:
        return self.http.post(self.frontend + path, json=body, **kwargs)

    def completion(self, **body: Any) -> dict[str, Any]:
        response = self.post("/v1/completions", {"model": "toy", **body})
        assert response.status_code == 200, response.text
        return response.json()

    def stream(self, path: str, body: Any) -> list[Any]:
        """The parsed ``data:`` payloads of an SSE response (``"[DONE]"`` kept as a string)."""
        events: list[Any] = []
        with self.http.stream("POST", self.frontend + path, json=body) as response:
            assert response.status_code == 200, response.read().decode()
            for line in response.iter_lines():
                if line.startswith("data: "):
                    data = line[len("data: ") :]
                    events.append(data if data == "[DONE]" else json.loads(data))
        return events

    def workers(self) -> list[dict[str, Any]]:
        return self.http.get(self.rl + "/v1/rl/workers").json()["workers"]

    def system_url(self) -> str:
        (worker,) = self.workers()
        return str(worker["system_url"])

    def admin(self, route: str, body: Any = None) -> dict[str, Any]:
        response = self.http.post(f"{self.system_url()}/engine/{route}", json=body or {})
        assert response.status_code == 200, response.text
        return response.json()

    def worker_log(self) -> str:
        logs = [p for p in self.launcher.processes if p.name.startswith("worker")]
        return "".join(p.log_path.read_text(errors="replace") for p in logs)

    def logged_requests(self) -> list[tuple[str, dict[str, Any]]]:
        """(request id, preprocessed request) for every request the worker received."""
        out = []
        for line in self.worker_log().splitlines():
            if " request " in line and line.rstrip().endswith("}"):
                request_id, _, body = line.split(" request ", 1)[1].partition(" ")
                out.append((request_id, json.loads(body)))
        return out

    def wait_for_request(self, already: int, timeout: float = 10.0) -> str:
        """The id of request number ``already + 1`` the worker received (polls its log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = self.logged_requests()
            if len(seen) > already:
                return seen[already][0]
            time.sleep(0.02)
        raise AssertionError(f"the worker received no request #{already + 1} in {timeout} s")


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - reused by another user's process
        return True
    return True


def assert_no_survivors(pids: list[int]) -> None:
    """Every process a stack started, and anything in its process group, is gone."""
    deadline = time.monotonic() + SURVIVOR_GRACE_S
    survivors = [pid for pid in pids if _alive(pid)]
    while survivors and time.monotonic() < deadline:
        time.sleep(0.05)
        survivors = [pid for pid in survivors if _alive(pid)]
    assert not survivors, f"process groups still alive after stop: {survivors}"


@contextlib.contextmanager
def running_stack(
    python: Path,
    engine: str,
    engine_faults: tuple[str, ...] = (),
    *,
    first_request_ok: bool = True,
) -> Iterator[Stack]:
    """Start broker + frontend + engine like the launcher; stop and check no survivors.

    ``python`` is the Dynamo environment's interpreter: take it from the ``dynamo_python``
    fixture (tests/conftest.py), which skips loudly on a developer machine without Dynamo and
    fails in CI.  The first completion is timed (launch -> first answer); it must be a 200
    unless an engine fault makes every request fail (``first_request_ok=False``).
    """
    launcher = _LowSystemPortLauncher(engine, python=python, engine_faults=engine_faults)
    started = time.monotonic()
    processes: list[ManagedProcess] = []
    stack: Stack | None = None
    try:
        target = launcher.start()
        processes = list(launcher.processes)
        with httpx.Client(timeout=30.0, trust_env=False) as http:
            first = http.post(
                target.frontend_url + "/v1/completions",
                json={"model": "toy", "prompt": [316, 276], "max_tokens": 1},
            )
            assert first.status_code == 200 or not first_request_ok, first.text
            pids = [p.pid for p in processes if p.pid is not None]
            stack = Stack(launcher, target, time.monotonic() - started, http, pids)
            yield stack
    finally:
        processes = processes or list(launcher.processes)
        launcher.stop()
        if stack is not None:
            stack.exit_codes = {p.name: p.exited() for p in processes}
        assert_no_survivors([p.pid for p in processes if p.pid is not None])


def stack_fixture(
    engine: str, engine_faults: tuple[str, ...] = ()
) -> Callable[[], Iterator[Stack]]:
    """A module-scoped fixture that shares one stack among the tests of a module."""

    @pytest.fixture(scope="module")
    def fixture(dynamo_python: Path) -> Iterator[Stack]:
        with running_stack(dynamo_python, engine, engine_faults) as stack:
            yield stack

    return fixture
