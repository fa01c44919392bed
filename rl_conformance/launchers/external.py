"""A deployment someone else runs: nothing to start or stop."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError
from ..target import Target, check_backend


@dataclass
class ExternalLauncher:
    """A deployment someone else runs: nothing to start or stop."""

    backend: str
    frontend_url: str
    rl_url: str | None = None
    model: str | None = None
    target_id: str = ""

    def __post_init__(self) -> None:
        self.backend = check_backend(self.backend)
        for name, url in (("--frontend", self.frontend_url), ("--rl-url", self.rl_url)):
            if url is not None and not url.startswith(("http://", "https://")):
                raise ConfigurationError(f"{name}: expected an http(s) URL, observed {url!r}")
        self.target_id = self.target_id or f"external-{self.backend}"

    def start(self) -> Target:
        return Target(
            id=self.target_id,
            backend=self.backend,
            kind="external",
            frontend_url=self.frontend_url,
            rl_url=self.rl_url,
            model=self.model,
        )

    def stop(self) -> None:
        return None
