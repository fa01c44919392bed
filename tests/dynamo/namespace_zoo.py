"""A real Dynamo 1.6.1 frontend in front of one process that registers the RL endpoint in many
namespaces (``fake_backends.dynamo.namespace_zoo``): the real RL listener, asked about a whole
fleet of namespaces, restarted under any environment by ``DynamoLauncher.rescope_listener``."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from rl_conformance.errors import LaunchError
from rl_conformance.launchers.dynamo import READY_TIMEOUT_S, DynamoLauncher, _system_port
from rl_conformance.launchers.processes import ManagedProcess
from rl_conformance.target import Target


@dataclass
class NamespaceZooLauncher(DynamoLauncher):
    namespaces: Sequence[str] = field(default_factory=tuple)

    def _engines(self, python: Path, model_dir: Path, env: dict[str, str]) -> list[ManagedProcess]:
        source_root = str(Path(__file__).resolve().parents[2])
        command = [str(python), "-m", "fake_backends.dynamo.namespace_zoo"]
        for namespace in self.namespaces:
            command += ["--namespace", namespace]
        zoo_env = dict(env, PYTHONPATH=source_root, DYN_SYSTEM_PORT=str(_system_port()))
        return [self._process("worker-zoo", command, zoo_env)]

    def _wait_ready(self, frontend_url: str, rl_url: str) -> None:
        self._wait_for(rl_url, lambda workers: True)

    def start(self) -> Target:
        """Ready when the listener, scoped to every namespace, lists every endpoint."""
        target = super().start()
        try:
            self.rescope_listener({"DYN_NAMESPACE_PREFIX": "dynamo"})
            wanted = set(self.namespaces)
            self._wait_for(
                self._urls[1],
                lambda workers: {w.get("namespace") for w in workers if w.get("routes")} >= wanted,
            )
        except BaseException:
            self.stop()
            raise
        return target

    def _wait_for(self, rl_url: str, ready: Callable[[list[dict[str, Any]]], bool]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        last: Any = "no answer"
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            while time.monotonic() < deadline:
                try:
                    last = http.get(rl_url + "/v1/rl/workers").json().get("workers", [])
                    if ready(last):
                        return
                except (httpx.HTTPError, ValueError, AttributeError):
                    pass
                time.sleep(0.2)
        raise LaunchError(f"the namespace zoo was not ready in {READY_TIMEOUT_S:g} s: {last}")
