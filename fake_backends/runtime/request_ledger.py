"""The request ledger: one entry per generation attempt and how it ended.

Why: "retries and cancellations cannot admit the same sample twice" is a property of the
whole deployment, not of one response.  A suite (or its self-tests) can only check that a
disconnect really stopped generation, or that a retried attempt did not also deliver a
late answer, if something records every attempt with its worker, its outcome and how many
tokens it generated.  The real Dynamo has no such ledger; the fake's control port exposes
this one (``GET/DELETE {control}/request_ledger``).

Outcomes: ``completed`` (ran to its own end), ``aborted`` (ended by the worker: pause in
abort mode, ``abort_request``, an SGLang abort), ``cancelled`` (the client went away and
generation stopped), ``failed`` (the fake itself broke).  While an attempt runs its
``outcome`` and ``ended_at`` are null.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

Outcome = Literal["completed", "aborted", "cancelled", "failed"]
OUTCOMES: tuple[Outcome, ...] = ("completed", "aborted", "cancelled", "failed")


@dataclass
class RequestRecord:
    """One generation attempt.  Mutated by the ledger only, under its lock."""

    attempt_id: str  # the client's x-request-id, else generated
    route: str  # the HTTP path, e.g. /v1/completions
    response_id: str  # the id the response carries (cmpl-..., chatcmpl-..., the SGLang rid)
    worker_instance_id: int | None  # None until a worker was picked
    started_at: float  # epoch seconds
    ended_at: float | None = None
    outcome: Outcome | None = None
    tokens_generated: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class RequestLedger:
    """Thread-safe: the event loop writes, tests and the control port read snapshots."""

    def __init__(self) -> None:
        self._records: list[RequestRecord] = []
        self._lock = threading.Lock()

    def open(self, attempt_id: str, route: str, response_id: str) -> RequestRecord:
        record = RequestRecord(attempt_id, route, response_id, None, time.time())
        with self._lock:
            self._records.append(record)
        return record

    def assign(self, record: RequestRecord, instance_id: int) -> None:
        with self._lock:
            record.worker_instance_id = instance_id

    def count_token(self, record: RequestRecord, tokens: int = 1) -> None:
        with self._lock:
            record.tokens_generated += tokens

    def close(self, record: RequestRecord, outcome: Outcome) -> bool:
        """End an attempt; False (and no change) when it had already ended."""
        with self._lock:
            if record.outcome is not None:
                return False
            record.outcome = outcome
            record.ended_at = time.time()
            return True

    def entries(self) -> list[RequestRecord]:
        """Snapshots, oldest first (later changes do not show through)."""
        with self._lock:
            return [dataclasses.replace(r) for r in self._records]

    def clear(self) -> None:
        """Forget every entry (attempts still running keep updating their own records)."""
        with self._lock:
            self._records.clear()
