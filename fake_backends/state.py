"""The shared state of one fake deployment, handed to every ASGI app it serves."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from fake_backends.faults import ActiveFaults
from fake_backends.ledger import AdminLedger
from fake_backends.personalities import Personality
from fake_backends.workers import EngineWorker, Router


@dataclass
class DeploymentState:
    personality: Personality
    model_name: str
    workers: list[EngineWorker]
    faults: ActiveFaults = field(default_factory=ActiveFaults)
    ledger: AdminLedger = field(default_factory=AdminLedger)
    created: int = field(default_factory=lambda: int(time.time()))
    rl_reads: itertools.count[int] = field(default_factory=itertools.count)
    router: Router = field(init=False)

    def __post_init__(self) -> None:
        self.router = Router(self.workers)

    def fault(self, name: str) -> bool:
        return self.faults.active(name)

    def reported_model(self) -> str:
        """The model name generation responses carry (a fault can make it lie)."""
        return "other-model" if self.fault("model_identity_mismatch") else self.model_name
