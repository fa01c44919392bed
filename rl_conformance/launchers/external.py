"""A deployment someone else runs: nothing to start or stop."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import ClassVar

from ..model.releases import FLAG_SOURCE, MAIN, UNKNOWN_SOURCE
from ..model.target import Target, check_backend, check_url


@dataclass
class ExternalLauncher:
    """A deployment someone else runs: nothing to start or stop."""

    kind: ClassVar[str] = "external"
    """What its targets' `Target.kind` is."""
    starts_cheaply: ClassVar[bool] = False

    backend: str
    frontend_url: str
    rl_url: str | None = None
    model: str | None = None
    worker_urls: tuple[str, ...] = ()
    release: str | None = None
    """`--dynamo-release`, when declared (a release the deployment publishes wins over it)."""
    request_trace: str | None = None
    """`--request-trace`: where the frontend writes its request trace."""
    eos_token_ids: tuple[int, ...] = ()
    """`--eos-token-id`: the model's end-of-sequence ids."""
    target_id: str = ""

    def __post_init__(self) -> None:
        self.backend = check_backend(self.backend)
        check_url("--frontend", self.frontend_url)
        if self.rl_url is not None:
            check_url("--rl-url", self.rl_url)
        for url in self.worker_urls:
            check_url("--worker-url", url)
        self.target_id = self.target_id or f"external-{self.backend}"

    def start(self) -> Target:
        return Target(
            id=self.target_id,
            backend=self.backend,
            kind=self.kind,
            frontend_url=self.frontend_url,
            rl_url=self.rl_url,
            model=self.model,
            worker_urls=tuple(self.worker_urls),
            release=self.release or MAIN,
            release_source=FLAG_SOURCE if self.release else UNKNOWN_SOURCE,
            request_trace=self.request_trace,
            eos_token_ids=tuple(self.eos_token_ids),
        )

    def prepare(self, stack: contextlib.ExitStack) -> None:
        return None

    def stop(self) -> None:
        return None
