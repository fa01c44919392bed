"""The first thing a rollout client is judged on: on a healthy fleet its rollouts reach the
frontend and come back as samples ("Generation reaches the intended Dynamo frontend and
backend"). Without it a client that produces nothing (a `generate` that always raises, a
mistyped path) would be judged only on what it never did, and certified on absence."""

from __future__ import annotations

from ..contract import adapter
from .audit import FRONTEND, NOT_CLAIMED, AuditRecord, Step
from .evidence import Evidence, shown
from .findings import Ruling, failed, judges, never_exercised, passed
from .replies import raw_payload_hazard, verified_terminal

STILL_OPEN = ("returned", NOT_CLAIMED)
"""A refresh that returned (the adapter says the fleet serves the new policy) or that was not
driven (the fleet was left as it was) leaves generation open."""


def healthy_rollouts(evidence: Evidence) -> list[Step]:
    """The rollouts the fleet served with none of the scenario's events: driven, not cancelled
    by the trainer, none of the requests sent meanwhile acted on by the scenario, and every
    refresh begun before it one that left generation open."""
    healthy = []
    for step in evidence.generate_steps():
        if step.cancelled:
            continue
        earlier = [s for s in evidence.steps if s.kind == "refresh" and s.started < step.started]
        if any(s.outcome not in STILL_OPEN for s in earlier):
            continue
        if any(record.staged for record in evidence.within(step)):
            continue
        healthy.append(step)
    return healthy


def _sent(records: list[AuditRecord]) -> str:
    """What a step sent to the frontend."""
    frontend = [r for r in records if r.plane == FRONTEND]
    return f"it sent {shown(frontend)}" if frontend else "it sent no request to the frontend"


def _why_nothing(evidence: Evidence, step: Step) -> str:
    records = evidence.within(step)
    if step.outcome.startswith("raised"):
        return f"generate raised {step.detail or step.outcome.removeprefix('raised: ')}; " + _sent(
            records
        )
    if step.outcome == "hung":
        return f"generate {step.detail}; " + _sent(records)
    verified = [r for r in records if r.is_generation and verified_terminal(r)]
    if verified:
        return (
            f"generate returned no sample although request #{verified[0].seq} "
            f"({verified[0].method} {verified[0].path}) was answered with a verified terminal "
            "reply" + raw_payload_hazard(verified[0])
        )
    return "generate returned no sample: " + _sent(records)


@judges(adapter.GENERATION_REACHES_BACKEND)
def generation_reaches_backend(evidence: Evidence) -> Ruling:
    judged = [
        step
        for step in healthy_rollouts(evidence)
        if step.outcome != "gated"  # gating is the refresh items' to judge
    ]
    if not judged:
        return never_exercised("no rollout met a healthy fleet in this scenario")
    admitted = {admission.step for admission in evidence.admissions}
    for step in judged:
        if step.index not in admitted:
            return failed(
                f"rollout {step.label} on a healthy fleet gave no sample: "
                + _why_nothing(evidence, step),
                "a verified sample admitted for every rollout the healthy fleet served",
                step.outcome,
            )
    return passed(f"{len(judged)} rollout(s) on a healthy fleet, each admitted a sample")
