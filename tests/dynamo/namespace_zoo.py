"""A real Dynamo 1.6.1 frontend in front of one process that registers the RL endpoint in many
namespaces (``fake_backends.dynamo.namespace_zoo``): the real RL listener, asked about a whole
fleet of namespaces, restarted under any environment by ``DynamoLauncher.rescope_listener``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from rl_conformance.launchers.dynamo import READY_TIMEOUT_S, DynamoLauncher, _system_port
from rl_conformance.launchers.processes import ManagedProcess
from rl_conformance.launchers.readiness import wait_until_ready
from rl_conformance.model.target import Target


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
        wait_until_ready(self.target_id, lambda http: (True, "started"), deadline_s=1)

    def start(self) -> Target:
        """Ready when the listener, scoped to every namespace, lists every endpoint."""
        target = super().start()
        wanted = set(self.namespaces)

        def all_listed(http: httpx.Client) -> tuple[bool, str]:
            workers = http.get(self._urls[1] + "/v1/rl/workers").json().get("workers", [])
            listed = {w.get("namespace") for w in workers if w.get("routes")}
            return listed >= wanted, f"{len(listed & wanted)} of {len(wanted)} namespaces listed"

        try:
            self.rescope_listener({"DYN_NAMESPACE_PREFIX": "dynamo"})
            wait_until_ready("the namespace zoo", all_listed, deadline_s=READY_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return target
