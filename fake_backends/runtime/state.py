"""The shared state of one fake deployment, handed to every ASGI app it serves."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fake_backends.faults.deployment import ActiveFaults, active_faults
from fake_backends.model.tokenizer import VOCAB_SIZE
from fake_backends.runtime.admin_ledger import AdminLedger
from fake_backends.runtime.metrics import Metrics
from fake_backends.runtime.personalities import Personality
from fake_backends.runtime.request_ledger import RequestLedger
from fake_backends.runtime.request_trace import RequestTrace
from fake_backends.runtime.workers import EngineWorker, Router


@dataclass
class DeploymentState:
    personality: Personality
    model_name: str
    workers: list[EngineWorker]
    faults: ActiveFaults = field(default_factory=active_faults)
    admin_ledger: AdminLedger = field(default_factory=AdminLedger)
    request_ledger: RequestLedger = field(default_factory=RequestLedger)
    metrics: Metrics = field(default_factory=Metrics)
    admin_family: str = "python"  # vLLM only: "python" workers or the native "sidecar"
    created: int = field(default_factory=lambda: int(time.time()))
    rl_reads: itertools.count[int] = field(default_factory=itertools.count)
    # The order the RL listener lists its workers in (``discovery.listener.LISTING_ORDERS``):
    # "sorted" as the real listener does, or another legal order on every read; and the
    # permutation of the last read (so a shuffled read never repeats the one before it).
    listing_order: str = "sorted"
    last_listing: tuple[int, ...] = ()
    # Each listed worker also carries `world_size` 2 and an `admin_base_url` apart from its
    # system URL (transfer metadata, as a tensor-parallel worker publishes it).
    admin_base_urls: bool = False
    # The ids the model takes in a prompt (the toy vocabulary's size, or fewer: a small model's).
    vocabulary: int = VOCAB_SIZE
    router: Router = field(init=False)
    # None: the RL listener reads the process environment, like the real frontend does.
    listener_env_override: Mapping[str, str] | None = None
    # Worker index -> what it answers the RL listener's route probe instead of its own reply
    # (`discovery.probes.HANG`: nothing); set through the control port.
    probe_replies: dict[int, Any] = field(default_factory=dict)
    # The Dynamo release whose frontend the deployment plays (`--dynamo-release`; never
    # published as Dynamo's version); None: the newest the fakes know.
    dynamo_release: str | None = None
    # How many times the frontend moves one request to another worker when its worker's process
    # dies under it (Dynamo's `--migration-limit`; 0, Dynamo's default: never).
    migration_limit: int = 0
    # Attempts still running, by attempt id (x-request-id), oldest first: the frontend's
    # `flow.LiveRequest`s (typed loosely so that the runtime knows nothing of the frontend).
    running: dict[str, list[Any]] = field(default_factory=dict)
    # The request trace, on when the process environment turns it on (DYN_REQUEST_TRACE*).
    request_trace: RequestTrace | None = field(
        default_factory=lambda: RequestTrace.from_environment(os.environ)
    )

    def __post_init__(self) -> None:
        self.router = Router(self.workers)

    def reported_model(self) -> str:
        """The model name generation responses carry (a fault can make it lie)."""
        return "other-model" if self.faults.active("model_identity_mismatch") else self.model_name

    def plays_1_6(self) -> bool:
        """A Dynamo 1.6 frontend: one `nvext.metadata_upload` form (1.7 added the others)."""
        return self.dynamo_release is not None and self.dynamo_release.startswith("1.6.")

    def listener_env(self) -> Mapping[str, str]:
        """The environment the RL listener decides its namespace scope from, read now."""
        if self.listener_env_override is not None:
            return self.listener_env_override
        return os.environ

    def set_listener_env(self, env: Mapping[str, str] | None) -> None:
        """Replace the listener's environment (None: back to the process environment)."""
        self.listener_env_override = None if env is None else dict(env)
