"""What one scenario run left behind (`Evidence`: the audit log, the steps the adapter was
driven through, the samples it admitted, the fleet), and what can be read off it before any item
is judged: the request an admitted sample came from, and whether the event the scenario exists
to stage happened. Every checklist item's judge is a pure function of it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .audit import FRONTEND, NOT_CLAIMED, AuditLog, AuditRecord, Delivery, Step
from .fleets import VLLM_FLEET, CertificationFleet
from .protocol import GENERATION, REFRESH, Sample
from .replies import engine_ids
from .scenarios import Generate, Refresh, Scenario


@dataclass(frozen=True)
class Admission:
    step: int
    sample: Sample


@dataclass
class Evidence:
    """Everything one scenario run left behind."""

    scenario: Scenario
    log: AuditLog
    steps: list[Step]
    admissions: list[Admission]
    fleet: CertificationFleet = VLLM_FLEET
    supplied: dict[str, str] = field(default_factory=dict)
    """Worker key -> URL handed to the adapter, for a family whose workers are not discovered."""
    checkpoints: str = "/conformance/weights"
    """The directory holding the scenario's checkpoint directories."""
    implements: frozenset[str] = frozenset({GENERATION, REFRESH})
    """What the adapter declared it implements."""
    records: list[AuditRecord] = field(init=False)

    def __post_init__(self) -> None:
        self.records = self.log.records

    def expects(self, position: int) -> bool | None:
        """The scenario's expectation of the refresh at `position`, unless its events answer a
        call in the deployment's place and the adapter never made that call (a client that
        does not flush meets no failed flush): the fleet then stayed healthy for it, and
        completing and failing closed are both safe (a refresh that returns is judged whole)."""
        expected = self.scenario.expects(position)
        delivered = any(record.delivery == Delivery.INJECTED for record in self.records)
        if expected is False and self.scenario.injection.replies_instead and not delivered:
            return None
        return expected

    def model_path(self, planned: Refresh) -> str:
        return os.path.join(self.checkpoints, planned.checkpoint)

    def mutations(self, records: list[AuditRecord]) -> list[AuditRecord]:
        read_only = self.fleet.read_only
        return [r for r in records if r.route is not None and r.route not in read_only]

    def worker_span(self, worker: str, step: Step) -> list[AuditRecord]:
        """A worker's calls that bear on `step`: those within it, preceded by those since the
        worker was last resumed (a worker a failed refresh left paused, its cache cleared, is
        not paused again by the retry)."""
        calls = [r for r in self.records if r.worker == worker and r.started <= step.finished]
        before = [r for r in calls if r.started < step.started]
        resumed = [i for i, r in enumerate(before) if r.route == self.fleet.resume]
        return calls[resumed[-1] + 1 if resumed else 0 :]

    def supplied_fleet(self) -> dict[str, dict[str, Any]]:
        """The workers handed to the adapter by URL, as entries shaped like discovery's."""
        return {
            worker: {"instance_id": worker, "system_url": url, "routes": list(self.fleet.served)}
            for worker, url in self.supplied.items()
        }

    def within(self, step: Step) -> list[AuditRecord]:
        return [r for r in self.records if step.started <= r.started <= step.finished]

    def refresh_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "refresh" and s.outcome != NOT_CLAIMED]

    def generate_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "generate" and s.outcome != NOT_CLAIMED]


def no_generation(evidence: Evidence) -> str:
    """Why no generation request can be judged: none was sent, or what was sent reached no
    generation route (every request is audited, whatever its path or status)."""
    sent = [r for r in evidence.records if r.plane == FRONTEND and r.method == "POST"]
    if not sent:
        return "no generation request was sent"
    return f"no request reached a generation route (sent: {shown(sent)})"


def shown(records: list[AuditRecord]) -> str:
    """Requests as a user reads them: up to three `METHOD path -> status`, and how many more."""
    listed = "; ".join(f"{r.method} {r.path} -> {r.status}" for r in records[:3])
    return listed + (f" and {len(records) - 3} more" if len(records) > 3 else "")


def sources_of(evidence: Evidence, admission: Admission) -> list[AuditRecord]:
    """The requests an admitted sample may have come from: those carrying its attempt identity.
    For a sample that names none (a client that sends no identity, which `attempt_identity`
    judges; also one whose shim names an identity of its own that never went on the wire, where
    no generation carried any), those of its rollout whose engine-returned ids are the
    sample's, else those anywhere in the scenario with its ids, else every request its rollout
    sent (a sample whose ids are not the engine's is still traced to the reply it was made from,
    and judged on it)."""
    sample = admission.sample
    generations = [record for record in evidence.records if record.is_generation]
    if sample.attempt_id:
        named = [r for r in generations if r.headers.get("x-request-id") == sample.attempt_id]
        if named or any(r.headers.get("x-request-id") for r in generations):
            return named
    anonymous = [r for r in generations if not r.headers.get("x-request-id")]
    rollout: list[AuditRecord] = []
    if 0 <= admission.step < len(evidence.steps):
        step = evidence.steps[admission.step]
        rollout = [r for r in anonymous if step.started <= r.started <= step.finished]
    ids = list(sample.token_ids)
    same_ids = [r for r in rollout if engine_ids(r) == ids]
    if same_ids:
        return same_ids
    same_ids = [r for r in anonymous if engine_ids(r) == ids]
    return same_ids or rollout


def source_of(evidence: Evidence, admission: Admission) -> AuditRecord | None:
    """The one request an admitted sample came from; None when its identity names no request or
    several (attempt identity is then judged by `attempt_identity`)."""
    found = sources_of(evidence, admission)
    return found[0] if len(found) == 1 else None


def not_staged(evidence: Evidence) -> str | None:
    """Why the event this scenario exists to stage (a reply cut short or rewritten, a rollout
    cancelled in flight) did not happen in this run, or None when it did or the scenario stages
    none. What the adapter did still fails where it is wrong, but nothing it was not shown may
    pass (`Scenario.staged_for`)."""
    generations = [record for record in evidence.records if record.is_generation]
    first = f"the first: {generations[0].summary()}" if generations else "none was sent"
    if evidence.scenario.injection.cuts and not any(
        record.delivery == Delivery.CUT for record in generations
    ):
        return f"no generation reply was cut short ({first})"
    rewrites = getattr(evidence.scenario.injection, "rewrites", ())
    if rewrites and not any(record.rewritten for record in generations):
        return (
            f"no generation reply had anything to change ({rewrites[0].what}; {first}): the "
            "adapter's replies carry none of the fields the event changes"
        )
    for step in _planned_cancels(evidence):
        if step.cancelled:
            continue
        if not any(record.is_generation for record in evidence.within(step)):
            return f"the adapter sent no generation request for slot {step.label} to cancel"
        return f"the trainer's cancel of slot {step.label} came after the rollout returned"
    return None


def _planned_cancels(evidence: Evidence) -> list[Step]:
    """The rollouts the trainer was to cancel in flight, as driven."""
    slots = {
        planned.slot
        for planned in evidence.scenario.steps
        if isinstance(planned, Generate) and planned.cancel_after_events is not None
    }
    return [step for step in evidence.generate_steps() if step.label in slots]
