"""What the suite knows about one deployment under test, and the interface of the launchers
that produce one (see `rl_conformance.launchers`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from .capabilities import Backend
from .errors import ConfigurationError


@dataclass
class Target:
    """One deployment. `model` may be None until resolved from `/v1/models`."""

    id: str
    backend: str
    kind: str
    frontend_url: str
    rl_url: str | None = None
    model: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    workers: list[dict[str, Any]] = field(default_factory=list)
    control_url: str | None = None

    def url(self, path: str) -> str:
        return self.frontend_url.rstrip("/") + path

    def rl(self, path: str) -> str:
        if not self.rl_url:
            raise ConfigurationError(f"target {self.id} has no RL listener URL (--rl-url)")
        return self.rl_url.rstrip("/") + path

    def describe(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("workers")
        data.pop("control_url")
        return data


class Launcher(Protocol):
    target_id: str
    backend: str

    def start(self) -> Target: ...

    def stop(self) -> None: ...


def check_backend(value: str) -> str:
    try:
        return Backend(value).value
    except ValueError:
        raise ConfigurationError(
            f"--backend: expected one of {', '.join(b.value for b in Backend)}, observed {value!r}"
        ) from None
