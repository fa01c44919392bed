"""The checklist item about samples generated across a refresh: a rollout a trainer overlaps with
a policy refresh has tokens of two policies, and must not be named one policy's."""

from __future__ import annotations

from ..contract import adapter
from .audit import AuditRecord, Step
from .evidence import Evidence, source_of
from .findings import Ruling, failed, judges, never_exercised, not_applicable, passed
from .fleet_events import SLOW_TOKEN_MS
from .protocol import REFRESH
from .replies import carries_tokens
from .scenarios import UNARY_LEAD_TOKENS


def _token_times(record: AuditRecord) -> list[float]:
    """When each event that carried generated tokens reached the client."""
    return [
        at
        for event, at in zip(record.events, record.event_times, strict=False)
        if carries_tokens(record, event)
    ]


def _unary_span(record: AuditRecord) -> list[float]:
    """A unary reply's tokens, bounded: its first was generated one slowed-engine token time
    after the request reached the engine (the scenario slowed it), its last before the reply
    was sent. Nothing for a reply the engine was not slowed for."""
    if record.events or not record.staged or record.finished is None:
        return []
    if record.status != 200 or not isinstance(record.response, dict):
        return []
    return [record.started + UNARY_LEAD_TOKENS * SLOW_TOKEN_MS / 1000, record.finished]


def _straddled(evidence: Evidence, record: AuditRecord) -> Step | None:
    """The completed refresh the generation's tokens straddle: some reached the client before
    the refresh's first pause was sent, some after its last resume was answered. In the
    certification fleet (our fake, its engine slowed for the scenario, the pause keeping requests
    in place) a token is released when it is generated, so the first are the old policy's and
    the last the new one's."""
    times = _token_times(record) or _unary_span(record)
    if not times:
        return None
    for step in evidence.refresh_steps():
        if step.outcome != "returned":
            continue
        calls = evidence.within(step)
        pauses = [r for r in calls if r.route == evidence.fleet.pause]
        resumes = [r for r in calls if r.route == evidence.fleet.resume and r.finished is not None]
        if not pauses or not resumes:
            continue
        resumed = max(r.finished for r in resumes if r.finished is not None)
        if times[0] < pauses[0].started and times[-1] > resumed:
            return step
    return None


def _finished_before_update(evidence: Evidence) -> str | None:
    """The attempt of an admitted sample whose request was sent before a completed refresh's
    first pause and answered before that refresh's first policy was applied: the refresh the
    scenario overlapped with it could not make it straddle."""
    for step in evidence.refresh_steps():
        if step.outcome != "returned":
            continue
        calls = evidence.within(step)
        pauses = [r for r in calls if r.route == evidence.fleet.pause]
        applies = [r for r in calls if r.route == evidence.fleet.update]
        if not pauses or not applies:
            continue
        for admission in evidence.admissions:
            record = source_of(evidence, admission)
            if (
                record is not None
                and record.finished is not None
                and record.started < pauses[0].started
                and record.finished < applies[0].started
                and record.finished > pauses[0].started
            ):
                return admission.sample.attempt_id
    return None


@judges(adapter.ONE_POLICY_SAMPLES)
def one_policy_samples(evidence: Evidence) -> Ruling:
    if REFRESH not in evidence.implements:
        return not_applicable(
            "not applicable: the adapter does not implement the refresh, so the kit drives none "
            "for a rollout to straddle",
        )
    judged = 0
    for admission in evidence.admissions:
        record = source_of(evidence, admission)
        step = None if record is None else _straddled(evidence, record)
        if step is None:
            continue
        judged += 1
        version = admission.sample.weight_version
        if version is not None:
            return failed(
                f"admitted the sample of attempt {admission.sample.attempt_id} as policy "
                f"{version!r}, yet its tokens straddle refresh {step.label}: the first arrived "
                "before the fleet was paused, the last after it resumed on the new policy",
                "weight_version None (not one policy's), or the sample not admitted",
                version,
            )
    if not judged:
        drained = _finished_before_update(evidence)
        if drained is not None:
            return passed(
                f"the rollout of attempt {drained} was in flight when a refresh began and was "
                "finished before any worker applied the new policy (the pause drained it): no "
                "admitted sample straddles a refresh",
            )
        return never_exercised("no admitted sample was generated across a refresh")
    return passed(f"{judged} sample(s) generated across a refresh, none named one policy's")
