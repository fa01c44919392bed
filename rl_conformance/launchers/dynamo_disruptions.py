"""What a test does to a running Dynamo deployment's processes, through no channel of Dynamo's
own: a worker departs and returns, is killed and revived or restarted on its system port, and the
frontend restarts with another namespace scope for its RL listener (the `Target.probe` channels
`WORKER_DEPARTURE`, `WORKER_KILL` and `LISTENER_RESTART` a `DynamoLauncher` offers)."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from ..errors import LaunchError
from .processes import ManagedProcess
from .readiness import wait_until_ready
from .real_engines import REAL_ENGINES

READY_TIMEOUT_S = 90.0
"""How long a deployment of toy workers (or a restarted part of one) has to answer again."""


class Disruptions:
    """The disruptions of a `DynamoLauncher`'s deployment (mixed into it: they act on its
    processes)."""

    if TYPE_CHECKING:
        engine: str
        target_id: str
        processes: list[ManagedProcess]
        workdir: Path | None
        _frontend: ManagedProcess | None
        _urls: tuple[str, str]

        @property
        def model_name(self) -> str: ...

    def depart_worker(self) -> None:
        """SIGTERM the last worker (it leaves discovery as a stopping worker does)."""
        self._last_worker().stop()

    def return_worker(self) -> None:
        """Start the last worker again with its command and environment (its system port
        too), and wait until the process is up; discovery is the test's to watch."""
        old = self._last_worker()
        old.stop()
        fresh = ManagedProcess(
            old.name, old.command, old.env, old.log_path, cwd=old.cwd, priority=old.priority
        )
        self.processes[self.processes.index(old)] = fresh
        fresh.start()

    def worker_exit(self, system_url: str) -> tuple[int, str] | None:
        process = self._serving(system_url)
        code = process.exited() if process is not None else None
        return None if code is None or process is None else (code, process.log_tail(400_000))

    def worker_log(self, system_url: str) -> str:
        process = self._serving(system_url)
        return process.log_tail(400_000) if process is not None else ""

    def kill_worker(self, system_url: str) -> None:
        """SIGKILL the worker serving `system_url` (`revive_worker` starts it again)."""
        process = self._serving(system_url)
        if process is None:
            raise LaunchError(f"{self.target_id} runs no worker at {system_url}")
        process.kill()

    def revive_worker(self, system_url: str) -> None:
        self.restart_worker(system_url)

    def restart_worker(self, system_url: str) -> None:
        """The worker's command again, on its system port; ready when its system server answers,
        the dead worker's registration has expired from discovery (until then the frontend may
        route to the fresh worker, then drop the model when the stale lease runs out, answering
        503 "not ready" for seconds), and the frontend routes a generation again."""
        old = self._serving(system_url)
        if old is None:
            raise LaunchError(f"{self.target_id} runs no worker at {system_url}")
        old.stop()
        fresh = ManagedProcess(
            old.name, old.command, old.env, old.log_path, cwd=old.cwd, priority=old.priority
        )
        self.processes[self.processes.index(old)] = fresh
        fresh.start()
        frontend_url = self._urls[0]
        workers = sum(1 for process in self.processes if "DYN_SYSTEM_PORT" in process.env)

        def serving(http: httpx.Client) -> tuple[bool, str]:
            health = http.get(system_url.rstrip("/") + "/health").status_code
            models = [m.get("id") for m in http.get(frontend_url + "/v1/models").json()["data"]]
            if health != 200 or self.model_name not in models:
                return False, f"/health {health}, {models}"
            registered = self._generate_instances()
            if registered is not None and len(registered) > workers:
                return False, f"discovery still holds {len(registered)} generate instances"
            body = {"model": self.model_name, "prompt": "ready", "max_tokens": 1}
            generated = http.post(frontend_url + "/v1/completions", json=body).status_code
            return generated == 200, f"a one-token generation answered {generated}"

        real = REAL_ENGINES.get(self.engine)
        wait_until_ready(
            f"{old.name} after a restart",
            serving,
            deadline_s=real.ready_timeout_s if real else READY_TIMEOUT_S,
            alive=lambda: self._alive([fresh]),
        )

    def _generate_instances(self) -> set[str] | None:
        """The instance ids file discovery holds for a `generate` endpoint (None without a
        discovery directory of ours)."""
        if self.workdir is None or not (self.workdir / "kv").is_dir():
            return None
        found: set[str] = set()
        for path in (self.workdir / "kv").rglob("*"):
            key = urllib.parse.unquote(path.name).split("/")
            if path.is_file() and len(key) == 4 and key[2] == "generate":
                found.add(key[3])
        return found

    def _serving(self, system_url: str) -> ManagedProcess | None:
        port = system_url.rstrip("/").rsplit(":", 1)[-1]
        found = [p for p in self.processes if p.env.get("DYN_SYSTEM_PORT") == port]
        return found[0] if found else None

    def _last_worker(self) -> ManagedProcess:
        workers = [p for p in self.processes if p.name.startswith("worker-")]
        if not workers:
            raise LaunchError(f"{self.target_id} runs no worker of ours to stop")
        return workers[-1]

    def rescope_listener(self, env: Mapping[str, str]) -> None:
        """Restart the frontend with these namespace variables in its own environment (the RL
        listener reads its scope from nothing else), and wait until it answers again. Every
        DYN_NAMESPACE* variable of the previous scope is dropped, the undocumented ones too."""
        if self._frontend is None:
            raise LaunchError(f"{self.target_id} is not running")
        old = self._frontend
        old.stop()
        base = {key: value for key, value in old.env.items() if not key.startswith("DYN_NAMESPACE")}
        fresh = ManagedProcess(
            old.name,
            old.command,
            {**base, **env},
            old.log_path,
            cwd=old.cwd,
            priority=old.priority,
        )
        self.processes[self.processes.index(old)] = fresh
        self._frontend = fresh
        fresh.start()

        def answers(http: httpx.Client) -> tuple[bool, str]:
            # Only the listener: model discovery follows its own scope rules, and an
            # environment may legitimately hide the model from /v1/models.
            status = http.get(self._urls[1] + "/v1/rl/workers").status_code
            return status == 200, f"GET /v1/rl/workers -> HTTP {status}"

        wait_until_ready(
            "the frontend after a re-scope",
            answers,
            deadline_s=READY_TIMEOUT_S,
            alive=lambda: self._alive([fresh]),
        )
        time.sleep(1.0)  # let the listener's first discovery settle

    @staticmethod
    def _alive(processes: list[ManagedProcess]) -> None:
        for process in processes:
            if process.exited() is not None:
                raise LaunchError(
                    f"{process.name} exited with code {process.exited()}; "
                    f"log tail:\n{process.log_tail()}"
                )
