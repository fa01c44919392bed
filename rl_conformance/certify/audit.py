"""The audit log: every request an adapter sent during a scenario, as the recording proxy saw it,
and the steps the runner drove, so that each request can be attributed to the step it served."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

FRONTEND = "frontend"
RL = "rl"
WORKER_PREFIX = "worker:"
MAX_LOGGED_EVENTS = 64


class Delivery:
    COMPLETE = "complete"
    """The whole response reached the client."""
    CLIENT_GONE = "client-gone"
    """The client left before the response was complete (timeout or cancellation)."""
    CUT = "cut"
    """The scenario cut the response short."""
    INJECTED = "injected"
    """The scenario answered instead of the deployment."""


@dataclass
class AuditRecord:
    seq: int
    plane: str
    """`frontend`, `rl`, or `worker:<instance_id>`."""
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    started: float
    status: int | None = None
    response: Any = None
    """A unary reply's JSON (or text), whole as the deployment produced it, also where the
    client received only `delivered_bytes` of it (as `upstream_events` keeps a cut stream's
    every event): a sample salvaged from a cut reply is still traced to its request."""
    delivered_bytes: int | None = None
    """For a unary reply the scenario cut short: how many bytes of its body reached the client
    (its `content-length` announced them all)."""
    events: list[Any] = field(default_factory=list)
    """A stream's `data:` payloads as the client received them (parsed JSON or `[DONE]`)."""
    upstream_events: list[Any] = field(default_factory=list)
    """Everything the deployment produced for a stream, even what the client never received."""
    event_times: list[float] = field(default_factory=list)
    """When each of `events` was sent to the client (monotonic seconds)."""
    delivery: str = Delivery.COMPLETE
    staged: bool = False
    """The scenario acted on this request (held, cut, paced, slowed, answered or rewrote its
    reply): a rollout whose requests none was staged for met a healthy fleet."""
    held: bool = False
    """The proxy held the reply back before delivering it (`Hold`)."""
    rewritten: str | None = None
    """What the scenario changed in the reply the client received (`Rewrite`), or None: the
    reply is judged as the client received it."""
    finished: float | None = None
    truth: Any = None
    """For a worker call: the discovery body the listener served as the call arrived (the
    scenario's events applied), or None where workers are not discovered."""

    @property
    def worker(self) -> str | None:
        return self.plane.removeprefix(WORKER_PREFIX) if self.is_worker else None

    @property
    def is_worker(self) -> bool:
        return self.plane.startswith(WORKER_PREFIX)

    @property
    def is_generation(self) -> bool:
        return (
            self.plane == FRONTEND
            and self.method == "POST"
            and ("completions" in self.path or self.path == "/generate")
        )

    @property
    def streamed(self) -> bool:
        """The request asked for an SSE stream."""
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def is_discovery(self) -> bool:
        return self.plane == RL and self.method == "GET" and self.path == "/v1/rl/workers"

    @property
    def route(self) -> str | None:
        """The administration route of a worker call (`/engine/<route>`)."""
        if not self.is_worker or not self.path.startswith("/engine/"):
            return None
        return self.path.removeprefix("/engine/")

    def summary(self) -> str:
        return (
            f"#{self.seq} {self.method} {self.plane}{self.path} -> {self.status} ({self.delivery})"
        )

    def to_json(self, origin: float = 0.0) -> dict[str, Any]:
        document: dict[str, Any] = {
            "seq": self.seq,
            "at_s": round(self.started - origin, 4),
            "plane": self.plane,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            "status": self.status,
            "delivery": self.delivery,
        }
        if self.staged:
            document["staged"] = True
        if self.held:
            document["held"] = True
        if self.rewritten:
            document["rewritten"] = self.rewritten
        if self.delivered_bytes is not None:
            document["delivered_bytes"] = self.delivered_bytes
        if self.truth is not None:
            document["listed_at_call"] = sorted(
                str(w.get("instance_id"))
                for w in self.truth.get("workers") or []
                if isinstance(w, dict) and w.get("system_url") and not w.get("error")
            )
        if self.events or self.upstream_events:
            document["events"] = self.events[:MAX_LOGGED_EVENTS]
            document["upstream_events"] = len(self.upstream_events)
        else:
            document["response"] = self.response
        return document


NOT_CLAIMED = "not-claimed"
"""A step's outcome when the adapter does not implement that kind of step (not driven)."""


@dataclass(frozen=True)
class Step:
    index: int
    kind: str
    """`generate` or `refresh` (a rollout and a refresh the trainer overlaps are two steps whose
    times overlap)."""
    label: str
    started: float
    finished: float
    outcome: str
    """`returned`, `gated` (GenerationGated), `refresh-failed` (RefreshFailed), `raised: ...`,
    `hung` (did not return within the step's bound), or `not-claimed`."""
    detail: Any = None
    cancelled: bool = False
    """The trainer cancelled this rollout while it was in flight."""


class AuditLog:
    """Thread-safe: the proxy appends from its event loop, the runner reads from its thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[AuditRecord] = []
        self.steps: list[Step] = []

    def open(
        self, plane: str, method: str, path: str, headers: dict[str, str], body: Any
    ) -> AuditRecord:
        with self._lock:
            record = AuditRecord(
                len(self._records), plane, method, path, headers, body, time.monotonic()
            )
            self._records.append(record)
            return record

    @property
    def records(self) -> list[AuditRecord]:
        with self._lock:
            return list(self._records)

    def adopt(self, record: AuditRecord) -> None:
        """Add a record made elsewhere (a recorded scenario read back)."""
        with self._lock:
            self._records.append(record)

    def within(self, step: Step) -> list[AuditRecord]:
        return [r for r in self.records if step.started <= r.started <= step.finished]

    def events_delivered(self, since: float) -> int:
        return max(
            (len(r.events) for r in self.records if r.is_generation and r.started >= since),
            default=0,
        )

    def replies_held(self, since: float) -> int:
        """How many generation requests sent since `since` the proxy is holding the reply of
        right now (arrived, answered upstream, not yet delivered)."""
        return sum(
            1
            for r in self.records
            if r.is_generation and r.started >= since and r.held and r.finished is None
        )
