"""An in-memory record of every worker administration request.

Tests of the (future) control plane need to see what a client actually sent to which
worker and in which order: the ledger keeps method, path, parsed body, reply and time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AdminRecord:
    instance_id: int
    method: str
    path: str
    body: Any  # parsed JSON, {} for an empty body, the raw text when it was not JSON
    status: int
    reply: Any
    received_at: float  # epoch seconds


class AdminLedger:
    def __init__(self) -> None:
        self._records: list[AdminRecord] = []
        self._lock = threading.Lock()

    def record(
        self, instance_id: int, method: str, path: str, body: Any, status: int, reply: Any
    ) -> AdminRecord:
        entry = AdminRecord(instance_id, method, path, body, status, reply, time.time())
        with self._lock:
            self._records.append(entry)
        return entry

    def entries(self) -> list[AdminRecord]:
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
