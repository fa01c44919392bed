"""The checklist items on the control plane: how an adapter discovers, mutates, fails closed and
completes a policy refresh, each a pure function of one scenario's evidence, judged by the
certification fleet's family (`fleets`)."""

from __future__ import annotations

from typing import Any

from .audit import AuditRecord, Step
from .fleets import CertificationFleet
from .judge import Evidence, Finding, failing, passing, skipping, verified_terminal
from .scenarios import Refresh


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


def discovery_before_control(evidence: Evidence) -> Finding:
    check = "adapter.discovery_before_control"
    if not evidence.fleet.discovered:
        return skipping(
            check,
            f"{evidence.fleet.name} workers are not discovered: the adapter is handed their URLs",
        )
    judged = 0
    for step in evidence.refresh_steps():
        records = evidence.within(step)
        unnegotiated = _negotiated(evidence, records)
        if unnegotiated is not None:
            return failing(
                check,
                f"refresh {step.label}: {unnegotiated}",
                "the complete route set negotiated before the first mutating call",
                unnegotiated,
            )
        previous = 0
        for phase, start in _phases(evidence.fleet, records):
            if not any(r.is_discovery for r in records[previous:start]):
                return failing(
                    check,
                    f"the {phase} phase of refresh {step.label} began without reading discovery "
                    "since the previous phase",
                    "GET /v1/rl/workers before each control phase",
                    [r.summary() for r in records[previous : start + 1]][-4:],
                )
            judged += 1
            previous = start
    if not judged:
        return skipping(check, "no control phase was entered")
    return passing(check, f"discovery read before each of {judged} control phase(s)")


def _listing(record: AuditRecord) -> dict[str, dict[str, Any]]:
    workers = (record.response or {}).get("workers") if isinstance(record.response, dict) else None
    return {str(w.get("instance_id")): w for w in workers or [] if isinstance(w, dict)}


def _fleet_at(evidence: Evidence, step: Step) -> dict[str, dict[str, Any]]:
    """The fleet as the last discovery read before the end of `step` listed it (the adapter's
    own read, within the step or before it); the supplied workers where none are discovered."""
    if not evidence.fleet.discovered:
        return evidence.supplied_fleet()
    reads = [r for r in evidence.records if r.is_discovery and r.started <= step.finished]
    return _listing(reads[-1]) if reads else {}


def mutations_to_advertised(evidence: Evidence) -> Finding:
    check = "adapter.mutations_to_advertised"
    latest: dict[str, dict[str, Any]] = evidence.supplied_fleet()
    mutated = 0
    for record in evidence.records:
        if record.is_discovery and evidence.fleet.discovered:
            latest = _listing(record)
            continue
        if record.route is None or record.route in evidence.fleet.read_only:
            if record.plane != "rl" and not record.is_worker and "/engine/" in record.path:
                return failing(
                    check,
                    f"an administration call went to the {record.plane}: {record.summary()}",
                    "worker system_url",
                    record.plane,
                )
            continue
        mutated += 1
        entry = latest.get(record.worker or "")
        if entry is None or entry.get("error") or not entry.get("system_url"):
            return failing(
                check,
                "a mutating call reached a worker the latest discovery read did not offer: "
                + record.summary(),
                "a listed worker with system_url and no error",
                entry,
            )
        if record.route not in entry.get("routes", []):
            return failing(
                check,
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
            return failing(
                check,
                f"refresh {step.label} reported success, yet advertised workers got no call "
                "through their system_url",
                sorted(listed),
                sorted(w for w in reached if w),
            )
    if not mutated:
        return skipping(check, "no mutating call was made")
    return passing(check, f"{mutated} mutating call(s), each to an advertised system_url and route")


def _failure_point(evidence: Evidence, records: list[AuditRecord]) -> AuditRecord | None:
    for record in evidence.mutations(records):
        if evidence.fleet.refused(record.status, record.response):
            return record
    return None


def gated_after_failure(evidence: Evidence) -> Finding:
    check = "adapter.gated_after_failure"
    refreshes = evidence.refresh_steps()
    refresh = next(iter(refreshes), None)
    if refresh is None:
        return skipping(check, "no refresh was driven")
    expected = evidence.scenario.expects(0)
    may_fail = expected is None and refresh.outcome != "returned"
    if expected is not False and not may_fail:
        return skipping(check, "the refresh of this scenario completed")
    records = evidence.within(refresh)
    failed = _failure_point(evidence, records)
    if failed is not None:
        later = records[records.index(failed) + 1 :]
        resumed = [r for r in later if r.route == evidence.fleet.resume]
        if resumed:
            return failing(
                check,
                f"resumed after a failed call ({failed.summary()})",
                f"no {evidence.fleet.resume} after a failed control call",
                resumed[0].summary(),
            )
    if refresh.outcome == "returned":
        return failing(
            check,
            f"refresh {refresh.label} reported success although it could not succeed",
            "RefreshFailed",
            refresh.outcome,
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
            return failing(
                check,
                f"rollout slot {step.label} generated after the failed refresh",
                "generation gated (GenerationGated, no request)",
                [r.summary() for r in sent],
            )
    return passing(check, f"refresh failed ({refresh.detail}); generation stayed gated")


def complete_iteration(evidence: Evidence) -> Finding:
    check = "adapter.complete_iteration"
    scenario = evidence.scenario
    steps = evidence.refresh_steps()
    judged = [
        step for position, step in enumerate(steps) if scenario.expects(position) is not False
    ]
    if not judged and any(scenario.expects(p) is False for p in range(len(steps))):
        return skipping(check, "no refresh of this scenario can complete")
    if any(
        scenario.expects(position) is None and step.outcome != "returned"
        for position, step in enumerate(steps)
    ):
        return skipping(check, "the refresh failed closed, which this scenario allows")
    if not judged:
        return skipping(check, "no refresh of this scenario can complete")
    for step in judged:
        plan = next(s for s in evidence.scenario.refreshes() if s.version == step.label)
        if step.outcome != "returned":
            return failing(
                check,
                f"refresh {step.label} failed on a healthy fleet: {step.detail}",
                "refresh_policy returns",
                step.outcome,
            )
        records = evidence.within(step)
        listed = _fleet_at(evidence, step)
        if len(listed) != evidence.scenario.expected_workers:
            return failing(
                check,
                "the refresh proceeded on a partial worker set",
                evidence.scenario.expected_workers,
                sorted(listed),
            )
        for worker in listed:
            broken = _worker_refresh(evidence.fleet, evidence.worker_span(worker, step), plan)
            if broken is not None:
                message, expected, observed = broken
                return failing(check, f"worker {worker} {message}", expected, observed)
        last_resume = max(i for i, r in enumerate(records) if r.route == evidence.fleet.resume)
        verified = [r for r in records[last_resume:] if r.is_generation and verified_terminal(r)]
        if not verified:
            return failing(
                check,
                f"refresh {step.label} reopened without a post-update generation",
                "a verified generation after resume, before the refresh returns",
                None,
            )
    last = judged[-1]
    gated = [s for s in evidence.generate_steps() if s.index > last.index and s.outcome == "gated"]
    if gated:
        return failing(
            check,
            f"rollout slot {gated[0].label} stayed gated after refresh {last.label} returned",
            "generation reopened once a refresh verifiably succeeded",
            gated[0].detail,
        )
    return passing(
        check,
        f"{len(judged)} refresh(es): every worker updated, verified, generation checked",
    )


def _worker_refresh(
    fleet: CertificationFleet, calls: list[AuditRecord], plan: Refresh
) -> tuple[str, str, Any] | None:
    """Whether one worker went through the whole refresh in order: paused, given the policy,
    its stale KV state invalidated, its version read back, resumed. The violation (message,
    expected, observed) or None."""
    order = [r.route for r in calls]
    whole = (
        f"{fleet.pause}, {fleet.update} of the policy, invalidation ({fleet.invalidation}), "
        f"{fleet.version}, {fleet.resume}"
    )

    def first(predicate: Any) -> int | None:
        return next((i for i, r in enumerate(calls) if predicate(r)), None)

    paused = first(lambda r: r.route == fleet.pause)
    applied = first(lambda r: fleet.applies(r.route, r.body, plan.version, plan.model_path))
    invalidated = [i for i, r in enumerate(calls) if fleet.invalidates(r.route, r.body)]
    read = [i for i, r in enumerate(calls) if r.route == fleet.version]
    resumed = [i for i, r in enumerate(calls) if r.route == fleet.resume]
    if paused is None or applied is None or not invalidated or not read or not resumed:
        return "did not go through the whole refresh", whole, order
    if fleet.family.clears_on_pause:
        # The pause itself invalidates: the one that preceded the update must.
        cleared = [i for i in invalidated if i <= applied]
        after_update = cleared[-1:] if cleared else []
    else:
        after_update = [i for i in invalidated if i >= applied]
    read_after = [i for i in read if i > applied]
    resume = resumed[-1]
    if (
        paused > applied
        or not after_update
        or not read_after
        or resume < max(after_update[-1], read_after[-1])
    ):
        return "took its refresh steps out of order", whole + ", in that order", order
    return None
