"""The checklist items on the control plane: how an adapter discovers, mutates, fails closed and
completes a policy refresh, each a pure function of one scenario's evidence, judged by the
certification fleet's family (`fleets`)."""

from __future__ import annotations

from typing import Any

from ..contract import adapter
from .audit import FRONTEND, AuditRecord, Step
from .deployment_routes import body_method, negotiation_failure
from .evidence import Evidence
from .findings import Ruling, failed, judges, never_exercised, not_applicable, passed
from .fleets import CertificationFleet
from .protocol import GENERATION
from .replies import verified_terminal


def _phases(fleet: CertificationFleet, records: list[AuditRecord]) -> list[tuple[str, int]]:
    """The control phases of one refresh in order, with the index of each phase's first call."""
    phases: list[tuple[str, int]] = []
    for index, record in enumerate(records):
        route = record.route
        if route is None or route in fleet.read_only:
            continue
        phase = "pause" if route == fleet.pause else "resume" if route == fleet.resume else "update"
        if not phases or phases[-1][0] != phase:
            phases.append((phase, index))
    return phases


def _negotiated(evidence: Evidence, records: list[AuditRecord]) -> str | None:
    """Before its first mutating call, a refresh holds a listing in which every worker advertises
    the whole update path ("require the complete capability set for the selected update path");
    the violation, or None."""
    mutations = evidence.mutations(records)
    if not mutations:
        return None
    first = records.index(mutations[0])
    reads = [r for r in records[:first] if r.is_discovery]
    if not reads:
        return None  # reported as a phase without discovery
    for worker, entry in sorted(_listing(reads[-1]).items()):
        missing = sorted(evidence.fleet.update_path - set(entry.get("routes") or []))
        if missing:
            return (
                f"began mutating the fleet although worker {worker} does not advertise "
                + ", ".join(missing)
            )
    return None


@judges(adapter.DISCOVERY_BEFORE_CONTROL)
def discovery_before_control(evidence: Evidence) -> Ruling:
    if not evidence.fleet.discovered:
        return not_applicable(
            f"not applicable: {evidence.fleet.name} workers are not discovered; the adapter is "
            "handed their URLs",
        )
    judged = 0
    for step in evidence.refresh_steps():
        records = evidence.within(step)
        unnegotiated = _negotiated(evidence, records)
        if unnegotiated is not None:
            return failed(
                f"refresh {step.label}: {unnegotiated}",
                "the complete route set negotiated before the first mutating call",
                unnegotiated,
            )
        previous = 0
        for phase, start in _phases(evidence.fleet, records):
            if not any(r.is_discovery for r in records[previous:start]):
                return failed(
                    f"the {phase} phase of refresh {step.label} began without reading discovery "
                    "since the previous phase",
                    "GET /v1/rl/workers before each control phase",
                    [r.summary() for r in records[previous : start + 1]][-4:],
                )
            judged += 1
            previous = start
    if not judged:
        return never_exercised("no control phase was entered")
    return passed(f"discovery read before each of {judged} control phase(s)")


def _listing(record: AuditRecord) -> dict[str, dict[str, Any]]:
    return _listing_of(record.response)


def _listing_of(document: Any) -> dict[str, dict[str, Any]]:
    workers = document.get("workers") if isinstance(document, dict) else None
    return {str(w.get("instance_id")): w for w in workers or [] if isinstance(w, dict)}


def _fleet_at(evidence: Evidence, step: Step) -> dict[str, dict[str, Any]]:
    """The fleet as the last discovery read before the end of `step` listed it (the adapter's
    own read, within the step or before it); the supplied workers where none are discovered."""
    if not evidence.fleet.discovered:
        return evidence.supplied_fleet()
    reads = [r for r in evidence.records if r.is_discovery and r.started <= step.finished]
    return _listing(reads[-1]) if reads else {}


@judges(adapter.MUTATIONS_TO_ADVERTISED)
def mutations_to_advertised(evidence: Evidence) -> Ruling:
    latest: dict[str, dict[str, Any]] = evidence.supplied_fleet()
    mutated = 0
    for record in evidence.records:
        if record.is_discovery and evidence.fleet.discovered:
            latest = _listing(record)
            continue
        if record.route is None or record.route in evidence.fleet.read_only:
            if record.plane != "rl" and not record.is_worker and "/engine/" in record.path:
                return failed(
                    f"an administration call went to the {record.plane}: {record.summary()}",
                    "worker system_url",
                    record.plane,
                )
            continue
        mutated += 1
        # Judged against what the listener lists as the call arrives, not the adapter's last
        # read, which may be stale (its own read when the listener could not be asked).
        listed = latest if record.truth is None else _listing_of(record.truth)
        entry = listed.get(record.worker or "")
        if entry is None or entry.get("error") or not entry.get("system_url"):
            return failed(
                "a mutating call reached a worker the listener did not offer at that moment: "
                + record.summary(),
                "a listed worker with system_url and no error",
                entry,
            )
        if record.route not in entry.get("routes", []):
            if not evidence.fleet.discovered and body_method(record) is not None:
                return failed(negotiation_failure(record), entry.get("routes"), record.route)
            return failed(
                f"route {record.route} is not among those the worker advertised",
                entry.get("routes"),
                record.route,
            )
    for step in evidence.refresh_steps():
        if step.outcome != "returned":
            continue
        records = evidence.within(step)
        listed = _fleet_at(evidence, step)
        reached = {r.worker for r in evidence.mutations(records)}
        unreached = sorted(set(listed) - reached)
        if not listed or unreached:
            return failed(
                f"refresh {step.label} reported success, yet advertised workers got no call "
                "through their system_url",
                sorted(listed),
                sorted(w for w in reached if w),
            )
    if not mutated:
        return never_exercised("no mutating call was made")
    return passed(f"{mutated} mutating call(s), each to an advertised system_url and route")


def _failure_point(evidence: Evidence, records: list[AuditRecord]) -> AuditRecord | None:
    for record in evidence.mutations(records):
        if evidence.fleet.refused(record.status, record.response):
            return record
    return None


@judges(adapter.GATED_AFTER_FAILURE)
def gated_after_failure(evidence: Evidence) -> Ruling:
    refreshes = evidence.refresh_steps()
    refresh = next(iter(refreshes), None)
    if refresh is None:
        return never_exercised("no refresh was driven")
    expected = evidence.expects(0)
    may_fail = expected is None and refresh.outcome != "returned"
    if expected is not False and not may_fail:
        return never_exercised("the refresh of this scenario completed")
    records = evidence.within(refresh)
    refused = _failure_point(evidence, records)
    if refused is not None:
        later = records[records.index(refused) + 1 :]
        resumed = [r for r in later if r.route == evidence.fleet.resume]
        if resumed:
            return failed(
                f"resumed after a failed call ({refused.summary()})",
                f"no {evidence.fleet.resume} after a failed control call",
                resumed[0].summary(),
            )
    if refresh.outcome == "returned":
        return failed(
            f"refresh {refresh.label} reported success although it could not succeed",
            "RefreshFailed",
            refresh.outcome,
        )
    if not any(record.plane != FRONTEND for record in records):
        return never_exercised(
            f"refresh {refresh.label} failed before it made any call to the listener or a worker "
            f"({refresh.detail}): nothing shows how the client handles a failure it meets",
        )
    if GENERATION not in evidence.implements:
        return passed(
            f"refresh failed ({refresh.detail}) and resumed no worker after the failure "
            "(generation not driven: the adapter declares refresh only)",
        )
    retried = next((s.index for s in refreshes[1:]), None)
    after = [
        s
        for s in evidence.generate_steps()
        if s.index > refresh.index and (retried is None or s.index < retried)
    ]
    for step in after:
        sent = [r for r in evidence.within(step) if r.is_generation]
        if sent or any(a.step == step.index for a in evidence.admissions):
            return failed(
                f"rollout slot {step.label} generated after the failed refresh",
                "generation gated (GenerationGated, no request)",
                [r.summary() for r in sent],
            )
    if after and not any(r.is_generation and r.started < refresh.started for r in evidence.records):
        return never_exercised(
            f"the client sent no generation request before refresh {refresh.label} failed, so "
            "its sending none after it cannot be told from never generating",
        )
    return passed(f"refresh failed ({refresh.detail}); generation stayed gated")


@judges(adapter.COMPLETE_ITERATION)
def complete_iteration(evidence: Evidence) -> Ruling:
    steps = evidence.refresh_steps()
    judged = [
        step for position, step in enumerate(steps) if evidence.expects(position) is not False
    ]
    if not judged and any(evidence.expects(p) is False for p in range(len(steps))):
        return never_exercised("no refresh of this scenario can complete")
    if any(
        evidence.expects(position) is None and step.outcome != "returned"
        for position, step in enumerate(steps)
    ):
        return never_exercised("the refresh failed closed, which this scenario allows")
    if not judged:
        return never_exercised("no refresh of this scenario can complete")
    for step in judged:
        plan = next(s for s in evidence.scenario.refreshes() if s.version == step.label)
        if step.outcome != "returned":
            return failed(
                f"refresh {step.label} failed on a healthy fleet: {step.detail}",
                "refresh_policy returns",
                step.outcome,
            )
        records = evidence.within(step)
        listed = _fleet_at(evidence, step)
        if len(listed) != evidence.scenario.expected_workers:
            return failed(
                "the refresh proceeded on a partial worker set",
                evidence.scenario.expected_workers,
                sorted(listed),
            )
        model_path = evidence.model_path(plan)
        for worker in listed:
            span = evidence.worker_span(worker, step)
            broken = _worker_refresh(evidence.fleet, span, plan.version, model_path)
            if broken is None:
                broken = _unverified(evidence, worker, span, records, plan.version, model_path)
            if broken is not None:
                message, expected, observed = broken
                return failed(f"worker {worker} {message}", expected, observed)
        if GENERATION not in evidence.implements:
            continue  # the framework generates through a client of its own
        last_resume = max(i for i, r in enumerate(records) if r.route == evidence.fleet.resume)
        verified = [r for r in records[last_resume:] if r.is_generation and verified_terminal(r)]
        if not verified:
            return failed(
                f"refresh {step.label} reopened without a post-update generation",
                "a verified generation after resume, before the refresh returns",
                None,
            )
    last = judged[-1]
    gated = [s for s in evidence.generate_steps() if s.index > last.index and s.outcome == "gated"]
    if gated:
        return failed(
            f"rollout slot {gated[0].label} stayed gated after refresh {last.label} returned",
            "generation reopened once a refresh verifiably succeeded",
            gated[0].detail,
        )
    generation = (
        "generation checked"
        if GENERATION in evidence.implements
        else "post-update generation not judged (the adapter declares refresh only)"
    )
    return passed(f"{len(judged)} refresh(es): every worker updated, verified, {generation}")


def _worker_refresh(
    fleet: CertificationFleet, calls: list[AuditRecord], version: str, model_path: str
) -> tuple[str, str, Any] | None:
    """Whether one worker went through the refresh in order: paused, given the policy, its stale
    KV state invalidated, resumed. The violation (message, expected, observed) or None."""
    order = [r.route for r in calls]
    whole = (
        f"{fleet.pause}, {fleet.update} of the policy, invalidation ({fleet.invalidation}), "
        f"{fleet.resume}"
    )
    paused = next((i for i, r in enumerate(calls) if r.route == fleet.pause), None)
    applied = _applied(fleet, calls, version, model_path)
    resumed = [i for i, r in enumerate(calls) if r.route == fleet.resume]
    if paused is None or applied is None or not resumed:
        return "did not go through the whole refresh", whole, order
    cleared = any(fleet.clears_on_pause(r.route, r.body) for r in calls[: applied + 1])
    flushed = any(fleet.flushes(r.route, r.body) for r in calls[applied : resumed[-1]])
    if paused > applied or resumed[-1] < applied:
        return "took its refresh steps out of order", whole + ", in that order", order
    if not (cleared or flushed):
        return (
            "reopened with the old weights' KV state: nothing invalidated it",
            f"invalidation: {fleet.invalidation}",
            [
                (r.route, r.body)
                for r in calls
                if r.route in (fleet.pause, fleet.flush, fleet.update)
            ],
        )
    return None


def _applied(
    fleet: CertificationFleet, calls: list[AuditRecord], version: str, model_path: str
) -> int | None:
    return next(
        (i for i, r in enumerate(calls) if fleet.applies(r.route, r.body, version, model_path)),
        None,
    )


def _unverified(
    evidence: Evidence,
    worker: str,
    calls: list[AuditRecord],
    records: list[AuditRecord],
    version: str,
    model_path: str,
) -> tuple[str, str, Any] | None:
    """Whether the worker was verified to serve the policy before the fleet reopened ("verify
    every worker"), in any of the ways the contract allows: the family's version read-back
    after the update, the update's own reply naming the version, or a post-update generation
    the worker served that reports the version. The violation, or None."""
    fleet = evidence.fleet
    applied = _applied(fleet, calls, version, model_path)
    assert applied is not None
    resumed = max(i for i, r in enumerate(calls) if r.route == fleet.resume)
    # What a read-back names is the adapter's to compare: one that reopens on a mismatch fails
    # the refresh that cannot succeed (gated_after_failure).
    read = any(r.route == fleet.version for r in calls[applied + 1 : resumed])
    update = calls[applied]
    declared = update.body.get("weight_version") if isinstance(update.body, dict) else None
    # The reply confirms the version the update named: the kit's, or the client's own name
    # for it (a training step).
    replied = _names(update.response, version) or (
        declared is not None and _names(update.response, declared)
    )
    served = any(
        r.is_generation
        and verified_terminal(r)
        and r.started >= calls[resumed].started
        and worker in _served_by(r)
        and _reported_version(r) == version
        for r in records
    )
    if read or replied or served:
        return None
    return (
        "was not verified to serve the policy before the fleet reopened",
        f"{fleet.version} after the update, an update reply naming {version!r}, or a "
        "post-update generation the worker served reporting it",
        [r.route for r in calls],
    )


def _names(reply: Any, version: str) -> bool:
    return isinstance(reply, dict) and version in reply.values()


def _nvext_of(record: AuditRecord) -> list[dict[str, Any]]:
    payloads = record.events if record.events else [record.response]
    return [
        p["nvext"] for p in payloads if isinstance(p, dict) and isinstance(p.get("nvext"), dict)
    ]


def _served_by(record: AuditRecord) -> set[str]:
    """The instance ids a generation's `nvext.worker_id` names."""
    ids: set[str] = set()
    for nvext in _nvext_of(record):
        named = nvext.get("worker_id")
        values = named.values() if isinstance(named, dict) else [named]
        ids.update(str(value) for value in values if value is not None)
    return ids


def _reported_version(record: AuditRecord) -> Any:
    for nvext in _nvext_of(record):
        engine = nvext.get("engine_data")
        if isinstance(engine, dict) and engine.get("weight_version") is not None:
            return engine["weight_version"]
    return None
