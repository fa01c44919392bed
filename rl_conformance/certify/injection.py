"""What a scenario does to the fleet an adapter meets, as the recording proxy carries it out:
the actions on one request's reply (answer instead of the deployment, hold, cut, pace, slow the
engine, rewrite what the reply says) and the `Injection` that decides them, request by request,
and changes what discovery lists. The default injection changes nothing."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .audit import AuditLog, AuditRecord
from .fleets import VLLM_FLEET, CertificationFleet


@dataclass(frozen=True)
class Respond:
    """Answer instead of the deployment: `body` as JSON, or as it is (a string) under another
    content type (an ingress's HTML error page)."""

    status: int
    body: Any
    kind: str = "application/json"


@dataclass(frozen=True)
class Rewrite:
    """Forward the request, then change what its reply says: `change` is given a copy of each
    JSON payload (the unary body, each stream event) and returns what the client receives.
    `what` names the change in the audit log (`AuditRecord.rewritten`) when it changed
    anything."""

    what: str
    change: Callable[[dict[str, Any]], dict[str, Any]]
    legal: bool = False
    """The changed reply is one a conforming deployment gives: the rollout still met a
    healthy fleet (not `AuditRecord.staged`)."""

    def apply(self, payload: Any) -> Any:
        if not isinstance(payload, dict):
            return payload
        return self.change(copy.deepcopy(payload))


@dataclass(frozen=True)
class Hold:
    """Produce the whole response upstream, then deliver it after `seconds` (a late completion)."""

    seconds: float


@dataclass(frozen=True)
class CutAfter:
    """Drop the connection after `events` SSE events, without the terminal `[DONE]`; a unary
    reply, which has no events, after the first half of its body."""

    events: int


@dataclass(frozen=True)
class Pace:
    """Deliver a stream one event every `seconds`."""

    seconds: float


@dataclass(frozen=True)
class SlowEngine:
    """Forward the request asking the engine to generate one token every `token_delay_ms`: the
    certification fleet is our fake deployment, which honours `x-fake-token-delay-ms`, so a
    control step the trainer takes meanwhile lands in the middle of the generation itself."""

    token_delay_ms: int


Action = Respond | Hold | CutAfter | Pace | SlowEngine | Rewrite


class Injection:
    """A scenario's events on one certification fleet. The default changes nothing."""

    replies_instead = False
    """The events answer calls in the deployment's place (a failed update, flush or
    generation): they reach only an adapter that makes those calls."""
    cuts = False
    """The events cut a generation reply short: a run in which no reply was cut staged
    nothing for the items the scenario exists to test."""
    control_only = False
    """The events reach only the control plane (a worker's control call); an injection that
    changes nothing but discovery is so too (`reaches_control_only`)."""

    def __init__(self, fleet: CertificationFleet = VLLM_FLEET) -> None:
        self.fleet = fleet
        self.armed_at: float | None = None
        """When the adapter's start-up ended: the events begin then, so a client that reads
        discovery or generates while starting meets a healthy fleet, and the refresh the
        scenario tests meets the events."""

    def arm(self) -> None:
        self.armed_at = time.monotonic()

    @property
    def armed(self) -> bool:
        return self.armed_at is not None

    def since_armed(self, log: AuditLog) -> list[AuditRecord]:
        """The records of requests sent once the events began."""
        if self.armed_at is None:
            return []
        armed_at = self.armed_at
        return [record for record in log.records if record.started >= armed_at]

    def generations(self, log: AuditLog) -> list[AuditRecord]:
        return [record for record in self.since_armed(log) if record.is_generation]

    def calls(self, log: AuditLog, route: str) -> list[AuditRecord]:
        return [record for record in self.since_armed(log) if record.route == route]

    def discovery_reads(self, log: AuditLog) -> list[AuditRecord]:
        return [record for record in self.since_armed(log) if record.is_discovery]

    @classmethod
    def unsupported(cls, fleet: CertificationFleet) -> str | None:
        """Why these events cannot happen on `fleet`, or None when they can."""
        if cls.discovery is not Injection.discovery and not fleet.discovered:
            return f"it changes discovery, which {fleet.name} workers are not registered with"
        return None

    @classmethod
    def reaches_control_only(cls) -> bool:
        """Only a client that refreshes the policy meets these events: a fleet that cannot
        stage them still serves the scenario's rollouts to a client that only generates."""
        return cls.control_only or cls.intercept is Injection.intercept

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        return None

    def discovery(self, body: dict[str, Any], log: AuditLog) -> dict[str, Any]:
        return body
