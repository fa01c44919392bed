"""Which deployments a run tests, and starting them on demand (and always stopping them)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .client import Client
from .errors import ConfigurationError, LaunchError
from .launchers import ExternalLauncher, FakeLauncher
from .target import Launcher, Target

DEFAULT_FAKES = ("vllm", "sglang", "trtllm")


@dataclass
class TargetPool:
    """Launchers by target id; each is started at most once, on first use, and stopped at the end.
    A launch failure is remembered, so every test of that target reports the same error."""

    launchers: dict[str, Launcher]
    started: dict[str, Target] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ids(self) -> list[str]:
        return list(self.launchers)

    def get(self, target_id: str, client: Client) -> Target:
        with self._lock:
            if target_id in self.failures:
                raise LaunchError(self.failures[target_id])
            if target_id not in self.started:
                try:
                    target = self.launchers[target_id].start()
                    resolve_model(target, client)
                except (LaunchError, ConfigurationError) as exc:
                    self.failures[target_id] = f"{target_id}: {exc}"
                    raise LaunchError(self.failures[target_id]) from exc
                self.started[target_id] = target
            return self.started[target_id]

    def planned_targets(self) -> list[Target]:
        """Started targets, plus placeholders for those never started (for the report)."""
        found = []
        for target_id, launcher in self.launchers.items():
            if target_id in self.started:
                found.append(self.started[target_id])
            else:
                note = self.failures.get(target_id, "not started")
                found.append(
                    Target(
                        id=target_id,
                        backend=launcher.backend,
                        kind="unknown",
                        frontend_url="",
                        notes=[note],
                    )
                )
        return found

    def stop_all(self) -> None:
        for launcher in self.launchers.values():
            try:
                launcher.stop()
            except Exception:
                continue


def resolve_model(target: Target, client: Client) -> None:
    """Fill `target.model` from `/v1/models` when not given: the one model listed, or an error."""
    if target.model:
        return
    exchange = client.get(target.url("/v1/models"), deadline_s=10)
    if exchange.status != 200:
        raise LaunchError(
            f"GET {target.url('/v1/models')} answered "
            f"{exchange.status or exchange.error}; cannot choose a model (use --model)"
        )
    try:
        data = exchange.json().get("data", [])
        names = [entry["id"] for entry in data]
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        raise LaunchError(f"/v1/models body unusable ({exc}): {exchange.body_preview()}") from exc
    if len(names) != 1:
        listed = ", ".join(map(str, names)) or "none"
        raise ConfigurationError(
            f"/v1/models lists {len(names)} models ({listed}); choose one with --model"
        )
    target.model = names[0]


def plan_targets(
    *,
    fakes: list[str] | None,
    frontend: str | None,
    rl_url: str | None,
    backend: str | None,
    model: str | None,
    faults: list[str],
    workers: int,
) -> TargetPool:
    launchers: dict[str, Launcher] = {}
    if frontend:
        if not backend:
            raise ConfigurationError("--frontend needs --backend {vllm|sglang|trtllm}")
        launcher: Launcher = ExternalLauncher(
            backend=backend, frontend_url=frontend, rl_url=rl_url, model=model
        )
        launchers[launcher.target_id] = launcher
    elif rl_url or backend:
        raise ConfigurationError(
            "--rl-url and --backend describe an external deployment: give --frontend URL too"
        )
    for name in fakes if fakes is not None else ([] if frontend else list(DEFAULT_FAKES)):
        launcher = FakeLauncher(backend=name, workers=workers, faults=tuple(faults))
        launchers[launcher.target_id] = launcher
    return TargetPool(launchers)
