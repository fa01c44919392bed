"""Engine workers: identity, weights, and how the frontend picks one.

A worker owns the weights it generates with (a tag feeding the toy model's hash) and the
caller-declared weight version (metadata only, as in vLLM's ``set_weight_version``).
Keeping them per worker lets a later control plane update workers one at a time and the
suite observe mixed fleets.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from fake_backends.toy_model import ToyModel

NAMESPACE = "dynamo"
COMPONENT = "backend"
GENERATE_ENDPOINT = "generate"
RL_ENDPOINT = "rl"

# Worker 0's id is above 2**53 on purpose: clients that parse JSON numbers as doubles
# corrupt it, which the discovery checks must catch.
FIRST_INSTANCE_ID = 7587886443219045121


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
    weights_tag: str = "initial"
    version: Any = None
    version_declared: bool = False
    system_url: str | None = None
    transport_address: str = "127.0.0.1:0"
    started_at: float = 0.0
    _models: dict[str, ToyModel] = field(default_factory=dict, repr=False)

    def model(self) -> ToyModel:
        """The toy model for the current weights (cached per weights tag)."""
        found = self._models.get(self.weights_tag)
        if found is None:
            found = self._models[self.weights_tag] = ToyModel(self.weights_tag)
        return found

    def load_weights(self, tag: str) -> None:
        """Swap the weights: every later generation on this worker changes."""
        self.weights_tag = tag

    def declare_version(self, version: Any) -> None:
        self.version = version
        self.version_declared = True

    def transport(self, endpoint: str) -> dict[str, str]:
        path = (
            f"{self.transport_address}/{self.instance_id:016x}/{NAMESPACE}/{COMPONENT}/{endpoint}"
        )
        return {"tcp": path}


class Router:
    """Round-robin over workers, unless the request pins an instance."""

    def __init__(self, workers: list[EngineWorker]) -> None:
        self._workers = workers
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def pick(self, pinned: int | None = None) -> EngineWorker | None:
        if not self._workers:
            return None
        if pinned is not None:
            for worker in self._workers:
                if worker.instance_id == pinned:
                    return worker
            return None
        with self._lock:
            turn = next(self._turn)
        return self._workers[turn % len(self._workers)]
