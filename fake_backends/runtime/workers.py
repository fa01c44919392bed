"""Engine workers: identity, namespace, weights, and how the frontend picks one.

A worker owns the weights it generates with (a tag feeding the toy model's hash), the
caller-declared weight version (metadata only, as in vLLM's ``set_weight_version``) and
its runtime (pause state, in-flight requests, prefix cache).  Keeping them per worker lets
the control plane update workers one at a time and the suite observe mixed fleets.

Routing follows the frontend: round-robin over the workers that are registered for
routing, unless the request pins an instance.  SGLang workers leave routing while paused
or released; when no worker is routable an unpinned request waits for one.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from fake_backends.model.toy_model import ToyModel
from fake_backends.runtime.metrics import WorkerCounters
from fake_backends.runtime.scheduler import POLL_SECONDS, WorkerRuntime

NAMESPACE = "dynamo"
COMPONENT = "backend"
GENERATE_ENDPOINT = "generate"
RL_ENDPOINT = "rl"

# Worker 0's id is above 2**53 on purpose: clients that parse JSON numbers as doubles
# corrupt it, which the discovery checks must catch.
FIRST_INSTANCE_ID = 7587886443219045121
INITIAL_WEIGHTS = "initial"
"""The weights tag of a worker started on no particular checkpoint."""


def instance_id_for(index: int, generation: int = 0) -> int:
    """Deterministic 64-bit ids: odd and above 2**63, so never exact as a float64."""
    if index == 0 and generation == 0:
        return FIRST_INSTANCE_ID
    digest = hashlib.blake2b(f"fake-worker/{generation}/{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") | (1 << 63) | 1


@dataclass
class EngineWorker:
    index: int
    instance_id: int
    model_name: str
    weights_tag: str = INITIAL_WEIGHTS
    initial_weights: str = INITIAL_WEIGHTS
    """The weights the worker's engine starts on, and restarts on after a crash."""
    version: Any = None
    version_declared: bool = False
    stamped: tuple[Any, bool] | None = None
    scheduler_version: Any = None
    """The version SGLang's per-token record (its scheduler) names, where a rename did not reach
    it (``rename_misses_token_record``); None: the version its generations name."""
    """What its generations name instead of (version, version_declared): the declaration before
    its engine restarted, under ``recovered_samples_keep_version``; None when faithful."""
    system_url: str | None = None
    transport_address: str = "127.0.0.1:0"
    started_at: float = 0.0
    namespace: str = NAMESPACE
    advertised_routes: tuple[str, ...] = ()  # what the worker tells RL discovery
    weight_groups: list[dict[str, Any]] = field(default_factory=list)  # vLLM update groups
    unpaused_update_status: int = 200
    """The HTTP status of its refusal of an update while running (200: a handled error)."""
    runtime: WorkerRuntime = field(default_factory=WorkerRuntime, repr=False)
    counters: WorkerCounters = field(init=False, repr=False)
    _models: dict[str, ToyModel] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.counters = WorkerCounters(self.instance_id, self.namespace)

    def model(self) -> ToyModel:
        """The toy model for the current weights (cached per weights tag)."""
        found = self._models.get(self.weights_tag)
        if found is None:
            found = self._models[self.weights_tag] = ToyModel(self.weights_tag)
        return found

    def load_weights(self, tag: str) -> None:
        """Swap the weights: every later generation on this worker changes."""
        self.weights_tag = tag

    def restart_engine(self, keep_version: bool = False, keep_stamp: bool = False) -> None:
        """The engine died and its sidecar started it again: its starting weights, nothing
        declared (``keep_version``: the declaration survives, a fault; ``keep_stamp``: only its
        generations still name it, a fault)."""
        self.weights_tag = self.initial_weights
        if keep_stamp:
            self.stamped = (self.version, self.version_declared)
        if not keep_version:
            self.version, self.version_declared = None, False

    def declare_version(self, version: Any) -> None:
        self.version = version
        self.version_declared = True
        self.stamped = None

    def sample_version(self) -> tuple[Any, bool]:
        """(version, declared) as its generations name it."""
        return self.stamped or (self.version, self.version_declared)

    def transport(self, endpoint: str, instance_id: int | None = None) -> dict[str, str]:
        shown = self.instance_id if instance_id is None else instance_id
        path = f"{self.transport_address}/{shown:016x}/{self.namespace}/{COMPONENT}/{endpoint}"
        return {"tcp": path}

    def endpoint_url(self, endpoint: str) -> str:
        """``dyn://{namespace}.{component}.{endpoint}``: the request-plane address."""
        return f"dyn://{self.namespace}.{COMPONENT}.{endpoint}"


class Router:
    """Round-robin over workers, unless the request pins an instance."""

    def __init__(self, workers: list[EngineWorker]) -> None:
        self._workers = workers
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def find(self, instance_id: int) -> EngineWorker | None:
        for worker in self._workers:
            if worker.instance_id == instance_id:
                return worker
        return None

    def pick(self, pinned: int | None = None) -> EngineWorker | None:
        """The pinned worker, or the next routable one; None when there is none."""
        if pinned is not None:
            return self.find(pinned)
        candidates = [w for w in self._workers if w.runtime.routable and w.runtime.registered]
        if not candidates:
            return None
        with self._lock:
            turn = next(self._turn)
        return candidates[turn % len(candidates)]

    def in_discovery(self, worker: EngineWorker) -> bool:
        """Whether the worker's generate instance is listed for routing: a paused or released
        SGLang worker and a paused native-sidecar worker leave discovery until resumed (under
        `stopped_worker_listed` they stay listed while they serve nothing)."""
        if worker.runtime.departed:
            return False
        if worker.runtime.faults.active("stopped_worker_listed"):
            return True
        return worker.runtime.routable and worker.runtime.registered

    def any_registered(self) -> bool:
        """Whether any worker's generate endpoint is registered: with none, the frontend has no
        ready instance of the model (a paused native-sidecar fleet)."""
        return any(worker.runtime.registered for worker in self._workers)

    async def acquire(self) -> EngineWorker:
        """The next routable worker, waiting while none is (all paused or released);
        `ModelNotReady` at once when no worker is registered at all."""
        while True:
            if not self.any_registered():
                raise ModelNotReady()
            worker = self.pick()
            if worker is not None:
                return worker
            await asyncio.sleep(POLL_SECONDS)


class ModelNotReady(Exception):
    """No worker of the model is registered: the frontend answers 503 at once."""
