"""What the run last did to each worker it administered, so that a run stopped mid-refresh can
say which workers it left paused or released, on which weights, and how to put them back.

A call is noted before it is sent (its answer may never come: the run was stopped while it
waited) and again with its status. A hold (a pause, a release, a sleep) stays open until its
undo call answers 2xx."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

UNDO: dict[str, str] = {
    "pause_generation": "resume_generation",
    "control/pause_generation": "control/resume_generation",
    "release_memory_occupation": "resume_memory_occupation",
    "control/release_memory_occupation": "control/resume_memory_occupation",
    "control/sleep": "control/wake_up",
}
"""A route that takes a worker out of service -> the route that brings it back (SGLang's pause
is undone by `continue_generation`: see `undo_of`)."""
UPDATE_KEYS = ("model_path", "weight_version", "version")


def undo_of(route: str, routes: tuple[str, ...] | None) -> str:
    """The route that undoes `route` on a worker advertising `routes` (None: not discovered)."""
    undo = UNDO[route]
    if route == "pause_generation" and routes is not None and "continue_generation" in routes:
        return "continue_generation"
    if route == "pause_generation" and routes is None:
        return "continue_generation"  # a worker given by URL: SGLang's family
    return undo


@dataclass
class WorkerMark:
    label: str
    system_url: str
    routes: tuple[str, ...] | None
    holds: dict[str, str] = field(default_factory=dict)
    """Open holds: route -> its undo route."""
    last: str = ""
    """The last call: route and status ("no answer" while in flight)."""
    weights: str = ""
    """The last update that answered 2xx, as its body named it."""

    def describe(self) -> str:
        state = ", ".join(f"held by {route}" for route in self.holds) or "not held"
        weights = f"; last update applied: {self.weights}" if self.weights else ""
        return f"{self.label} ({self.system_url}): {state}; last call {self.last}{weights}"

    def restore_commands(self) -> list[str]:
        base = self.system_url.rstrip("/")
        return [
            f"curl -sS -X POST {base}/engine/{undo} -H 'Content-Type: application/json' -d '{{}}'"
            for undo in self.holds.values()
        ]


@dataclass
class SentCall:
    """One mutating call, in the order the run sent them, the status it was answered with
    (None: no answer, or none yet) and the transport error that ended it without one."""

    system_url: str
    label: str
    route: str
    status: int | None = None
    error: str | None = None
    sent_at: float = field(default_factory=time.time)
    """Wall-clock seconds: to place the call against the times a worker's log gives."""


@dataclass
class AdminLedger:
    marks: dict[str, WorkerMark] = field(default_factory=dict)
    history: list[SentCall] = field(default_factory=list)
    """Every mutating call sent, oldest first: what a worker that died was last told."""
    _open: dict[tuple[int, str], SentCall] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def sent(self, worker: Any, route: str) -> None:
        with self._lock:
            self.history.append(SentCall(worker.system_url or "", worker.label, route))
            mark = self._mark(worker)
            self._open[id(mark), route] = self.history[-1]
            mark.last = f"{route} (no answer yet)"
            if route in UNDO:
                mark.holds[route] = undo_of(route, worker.routes)

    def answered(
        self, worker: Any, route: str, status: int | None, body: Any, error: str | None = None
    ) -> None:
        with self._lock:
            mark = self._mark(worker)
            sent = self._open.pop((id(mark), route), None)
            if sent is not None:
                sent.status, sent.error = status, error
            mark.last = f"{route} (HTTP {status})" if status is not None else f"{route} (no answer)"
            ok = status is not None and 200 <= status < 300
            if route in UNDO and status is not None and not ok:
                mark.holds.pop(route, None)  # refused: nothing is held
            if ok:
                for held, undo in list(mark.holds.items()):
                    if undo == route:
                        del mark.holds[held]
                if "update" in route and isinstance(body, dict):
                    named = [f"{key}={body[key]}" for key in UPDATE_KEYS if body.get(key)]
                    mark.weights = ", ".join(named) or route

    def held(self) -> list[WorkerMark]:
        with self._lock:
            return [mark for mark in self.marks.values() if mark.holds]

    def touched(self) -> list[WorkerMark]:
        with self._lock:
            return list(self.marks.values())

    def _mark(self, worker: Any) -> WorkerMark:
        url = worker.system_url or ""
        if url not in self.marks:
            self.marks[url] = WorkerMark(worker.label, url, worker.routes)
        return self.marks[url]
