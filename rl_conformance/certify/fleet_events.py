"""The events the certification scenarios stage on a fleet, each an `Injection`: a reply held
past the adapter's deadline, cut, paced, slowed, answered in the deployment's place or rewritten
as a real deployment may answer, and discovery changed under a refresh (a worker joins or leaves,
a route is missing, an entry carries a probe error, another protocol version, a new order)."""

from __future__ import annotations

from typing import Any

from . import hard_replies
from .audit import FRONTEND, AuditLog, AuditRecord
from .fleets import CertificationFleet
from .injection import Action, CutAfter, Hold, Injection, Pace, Respond, Rewrite, SlowEngine

HELD_TIMEOUT_S = 1.0
"""The adapter's deadline in the scenario whose reply is held past it."""
SLOW_TOKEN_MS = 250
"""The engine's pace for a rollout a refresh is to land in: six tokens take 1.5 s."""
LATE_BY_S = 0.6
"""How long past the adapter's deadline a held response completes."""
CANCEL_HOLD_S = 0.5
"""How long a unary reply is held for the trainer to cancel its rollout meanwhile: inside the
adapter's deadline, so the client meets the cancel, not a timeout."""


class FirstGenerationHeld(Injection):
    """The first attempt completes after the adapter's deadline."""

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        if record.is_generation and self.generations(log)[0] is record:
            return Hold(HELD_TIMEOUT_S + LATE_BY_S)
        return None


class FirstStreamCut(Injection):
    """The first reply is cut short: a stream after two events, a unary reply mid-body."""

    cuts = True

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        if record.is_generation and self.generations(log)[0] is record:
            return CutAfter(2)
        return None


class PacedStreams(Injection):
    """Streams slow enough for the trainer to cancel one mid-way; a unary reply, which has no
    events to pace, held while the trainer cancels it."""

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        if record.is_generation and self.generations(log)[0] is record:
            return Pace(0.15) if record.streamed else Hold(CANCEL_HOLD_S)
        return None


NOT_READY = {
    "message": "Model `toy` is not ready to serve requests yet. The deployment may still be "
    "starting up or is not fully provisioned. Please retry shortly.",
    "type": "Service Unavailable",
    "code": 503,
}


class FirstGenerationSlow(Injection):
    """The engine generates the first rollout slowly, so the refresh meets it mid-way."""

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        if record.is_generation and self.generations(log)[0] is record:
            return SlowEngine(SLOW_TOKEN_MS)
        return None


class FirstGenerationUnavailable(Injection):
    """A 503 as a paused or unregistered worker answers (real 1.6.1 sidecar recording)."""

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        if record.is_generation and self.generations(log)[0] is record:
            return Respond(503, NOT_READY)
        return None


def _hide(body: dict[str, Any], index: int) -> dict[str, Any]:
    workers = sorted(body.get("workers") or [], key=lambda w: str(w.get("instance_id")))
    hidden = workers[index]["instance_id"] if len(workers) > index else None
    body["workers"] = [w for w in body.get("workers") or [] if w.get("instance_id") != hidden]
    return body


class WorkerJoinsAfterPause(Injection):
    """A third worker registers once the refresh has begun."""

    def discovery(self, body: dict[str, Any], log: AuditLog) -> dict[str, Any]:
        if self.calls(log, self.fleet.pause):
            return body
        return _hide(body, 2)


class WorkerLeavesAfterPause(Injection):
    """The second worker is gone from discovery once the pause reached every worker."""

    def discovery(self, body: dict[str, Any], log: AuditLog) -> dict[str, Any]:
        paused = {record.worker for record in self.calls(log, self.fleet.pause)}
        if len(paused) >= len(body.get("workers") or []) > 0:
            return _hide(body, 1)
        return body


def _failing_worker_call(
    injection: Injection, route: str | None, record: AuditRecord, log: AuditLog
) -> Action | None:
    if route is None or record.route != route:
        return None
    if injection.calls(log, route)[0] is not record:
        return None
    return Respond(200, injection.fleet.failure_reply(route))


class UpdateFailsOnOneWorker(Injection):
    """The first call that applies a policy fails."""

    replies_instead = True

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        return _failing_worker_call(self, self.fleet.update, record, log)


class FlushFails(Injection):
    """The first flush fails (an adapter that does not flush never meets it)."""

    replies_instead = True
    control_only = True

    @classmethod
    def unsupported(cls, fleet: CertificationFleet) -> str | None:
        if fleet.flush is None:
            return f"{fleet.name} has no flush route: it invalidates by {fleet.invalidation}"
        return None

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        return _failing_worker_call(self, self.fleet.flush, record, log)


class PostUpdateGenerationFails(Injection):
    """Every generation after the fleet is resumed fails with a server error."""

    replies_instead = True

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        if record.is_generation and self.calls(log, self.fleet.resume):
            return Respond(
                500,
                {"message": "Internal server error", "type": "Internal Server Error", "code": 500},
            )
        return None


class RouteMissingOnOneWorker(Injection):
    """One worker lacks the route that applies a policy, which every refresh of the family
    needs (a flush or a version read may be done otherwise)."""

    def discovery(self, body: dict[str, Any], log: AuditLog) -> dict[str, Any]:
        workers = body.get("workers") or []
        missing = self.fleet.update
        if workers:
            first = min(workers, key=lambda w: str(w.get("instance_id")))
            first["routes"] = [r for r in first.get("routes", []) if r != missing]
        return body


class DiscoveryEntryError(Injection):
    """The listener could not probe one worker: `routes: []`, no system_url, an `error`."""

    def discovery(self, body: dict[str, Any], log: AuditLog) -> dict[str, Any]:
        workers = body.get("workers") or []
        if workers:
            first = min(workers, key=lambda w: str(w.get("instance_id")))
            for key in ("system_url", "admin_base_url", "world_size"):
                first.pop(key, None)
            first["routes"] = []
            first["error"] = "Unavailable: worker routes request failed"
        return body


class ProtocolVersionTwo(Injection):
    """Once the first rollout has been sent, the listener answers in a discovery protocol version
    this client does not speak (the worker entries unchanged). Any request to the frontend
    counts as the rollout: one a client sends to a path that is not a generation route must not
    spare its refresh the event."""

    def discovery(self, body: dict[str, Any], log: AuditLog) -> dict[str, Any]:
        if any(record.plane == FRONTEND for record in self.since_armed(log)):
            body["protocol_version"] = 2
        return body


class ReorderedListings(Injection):
    """Each discovery read lists the workers in the reverse order of the previous one: list
    position is not worker identity."""

    def discovery(self, body: dict[str, Any], log: AuditLog) -> dict[str, Any]:
        reads = len(self.discovery_reads(log))
        if reads % 2 == 0:
            body["workers"] = list(reversed(body.get("workers") or []))
        return body


class PartialWorkerSet(Injection):
    """The second worker is still registering during the first two discovery reads."""

    def discovery(self, body: dict[str, Any], log: AuditLog) -> dict[str, Any]:
        reads = self.discovery_reads(log)
        return _hide(body, 1) if len(reads) <= 2 else body


class RepliesRewritten(Injection):
    """The first generation replies, one per entry of `rewrites`, changed as a real deployment
    may answer (`hard_replies`); later replies as the deployment gave them."""

    rewrites: tuple[Rewrite, ...] = ()

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        if not record.is_generation:
            return None
        position = self.generations(log).index(record)
        return self.rewrites[position] if position < len(self.rewrites) else None


class IdsMissing(RepliesRewritten):
    rewrites = (Rewrite("every generated token id removed", hard_replies.without_ids),)


class LogprobsUnusable(RepliesRewritten):
    rewrites = (
        Rewrite("every selected logprob null", hard_replies.null_logprobs),
        Rewrite("one selected logprob fewer than tokens", hard_replies.short_logprobs),
    )


class FinishUnrecognised(RepliesRewritten):
    rewrites = (
        Rewrite("finish_reason null", hard_replies.no_finish),
        Rewrite('finish_reason "error"', hard_replies.error_finish),
    )


STOP_STRING = Rewrite(
    "a stop-string finish: nvext.engine_data and nvext.prompt_logprobs dropped",
    hard_replies.stop_string_finish,
    legal=True,
)


class StopStringFinish(RepliesRewritten):
    """Every reply ends on a stop string, as a greedy rollout that meets one does on every
    attempt: a retry cannot step around what the client does with it."""

    rewrites = (STOP_STRING,)

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        return STOP_STRING if record.is_generation else None


BAD_GATEWAY = (
    "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1>"
    "</center></body></html>"
)


class FirstGenerationBadGateway(Injection):
    """An ingress in front of the frontend answers the first attempt 502 with its HTML page."""

    def intercept(self, record: AuditRecord, log: AuditLog) -> Action | None:
        if record.is_generation and self.generations(log)[0] is record:
            return Respond(502, BAD_GATEWAY, "text/html")
        return None
