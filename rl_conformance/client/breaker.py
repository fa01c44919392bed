"""A circuit breaker per plane: a deployment that stopped answering stops costing a deadline
per test.

A plane is one origin (scheme, host, port) of one deployment: its frontend, its RL listener, one
worker's system server. After `threshold` consecutive transport failures of one route of an
origin (no complete answer within the deadline, a reset, a body or stream over its limit,
undecodable bytes) the breaker opens for the whole origin. Consecutive per route, so that a
frontend whose listings answer while every generation hangs is still recognised as wedged. Once
open, every later request to it raises `PlaneUnavailable` at once,
naming the reason and the first failing exchange, and the test reports `error`. Other origins,
so other planes and other targets, go on. A preflight probe can open it before any test runs.

A deadline the caller shortened on purpose (a test that expects a request to be held) is not a
failure of the plane; only requests given the run's full deadline count.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..errors import TransportError
from ..wire.exchange import Exchange

DEFAULT_THRESHOLD = 2


class PlaneUnavailable(TransportError):
    """The plane this request goes to stopped answering earlier in the run."""


class PlaneRefused(PlaneUnavailable):
    """The plane this request goes to is not what the user said it is (a URL that is not
    Dynamo's RL listener): a wrong input, refused with what showed it (`evidence`)."""

    def __init__(self, reason: str, evidence: tuple[object, ...] = ()) -> None:
        super().__init__(reason)
        self.evidence = evidence


@dataclass
class _Plane:
    failures: dict[str, int] = field(default_factory=dict)  # consecutive, by route
    first: dict[str, str] = field(default_factory=dict)
    opened: str | None = None
    refused: PlaneRefused | None = None
    """Set when the plane was refused (a wrong input, credentials refused): what each later
    request raises, with the evidence that showed it."""


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class CircuitBreaker:
    """`threshold` 0 never opens by itself (a preflight may still trip it)."""

    def __init__(self, threshold: int = DEFAULT_THRESHOLD) -> None:
        self.threshold = threshold
        self._planes: dict[str, _Plane] = {}
        self._lock = threading.Lock()

    def check(self, url: str) -> None:
        """Raise `PlaneUnavailable` if the plane of `url` is open."""
        with self._lock:
            plane = self._planes.get(origin(url))
            reason = plane.opened if plane is not None else None
            refused = plane.refused if plane is not None else None
        if refused is not None:
            raise copy.copy(refused)
        if reason is not None:
            raise PlaneUnavailable(reason)

    def record(self, exchange: Exchange, *, counts: bool = True) -> None:
        """Count a transport failure of the exchange's route, or reset its count on an answer.
        `counts=False`: the caller expected the failure (a deadline it shortened itself)."""
        key = origin(exchange.request.url)
        route = f"{exchange.request.method} {urlsplit(exchange.request.url).path}"
        with self._lock:
            plane = self._planes.setdefault(key, _Plane())
            if exchange.error is None:
                plane.failures.pop(route, None)
                plane.first.pop(route, None)
                return
            if not counts or plane.opened is not None:
                return
            failures = plane.failures[route] = plane.failures.get(route, 0) + 1
            first = plane.first.setdefault(
                route, f"{exchange.describe()}; reproduce: {exchange.curl()}"
            )
            if self.threshold and failures >= self.threshold:
                plane.opened = (
                    f"{key} stopped answering: {failures} consecutive transport failures of "
                    f"{route}; first: {first}"
                )

    def trip(self, url: str, reason: str) -> None:
        """Open the plane of `url` now (a failed preflight)."""
        key = origin(url)
        with self._lock:
            self._planes.setdefault(key, _Plane()).opened = f"{key} is unavailable: {reason}"

    def refuse(
        self,
        url: str,
        reason: str,
        evidence: tuple[object, ...] = (),
        error: PlaneRefused | None = None,
    ) -> None:
        """Open the plane of `url` now because it is not what the user said it is, or refuses
        the run's credentials: every request to it raises `error` (by default `PlaneRefused`
        with `reason`, naming the input and the fix) as it is."""
        key = origin(url)
        with self._lock:
            plane = self._planes.setdefault(key, _Plane())
            plane.opened = reason
            plane.refused = error if error is not None else PlaneRefused(reason, tuple(evidence))

    def clear(self) -> None:
        with self._lock:
            self._planes.clear()

    def refusals(self) -> dict[str, PlaneRefused]:
        """Refused planes and what their requests raise."""
        with self._lock:
            return {key: p.refused for key, p in self._planes.items() if p.refused is not None}

    def opened(self) -> dict[str, str]:
        """Open planes and why, for the report."""
        with self._lock:
            return {key: p.opened for key, p in self._planes.items() if p.opened is not None}
