"""The checklist items an adapter is judged on, each a pure function of one scenario's audit log,
the samples the adapter admitted and the steps it was driven through.

A check returns `pass` with what it verified, `fail` with the exchange that shows the violation,
or `skipped` as never exercised when the scenario gave it nothing to judge: no item passes on
zero observations (a client that sends nothing, admits nothing or refreshes nothing passes
nothing), and the skip names what would have exercised it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .audit import FRONTEND, NOT_CLAIMED, AuditLog, AuditRecord, Delivery, Step
from .fleets import VLLM_FLEET, CertificationFleet
from .protocol import GENERATION, REFRESH, Sample
from .replies import (
    asks_engine_ids,
    engine_ids,
    engine_logprobs,
    is_native,
    logprobs_match,
    prompt_ids,
    raw_payload_hazard,
    selected_logprobs,
    verified_terminal,
)
from .scenarios import Generate, Refresh, Scenario

PASS, FAIL, SKIPPED = "pass", "fail", "skipped"
NOT_APPLICABLE = "not-applicable"
"""An item of the half of the protocol the adapter does not implement."""


@dataclass(frozen=True)
class Admission:
    step: int
    sample: Sample


@dataclass(frozen=True)
class Finding:
    check_id: str
    outcome: str
    message: str
    expected: Any = None
    observed: Any = None


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


def passing(check: str, message: str) -> Finding:
    return Finding(check, PASS, message)


def failing(check: str, message: str, expected: Any, observed: Any) -> Finding:
    return Finding(check, FAIL, message, expected, observed)


NEVER_EXERCISED = "never exercised"
EXERCISED_BY: dict[str, str] = {
    "adapter.generation_reaches_backend": "a rollout the trainer drives on a healthy fleet",
    "adapter.verified_terminal_only": "a sample admitted from a reply the kit can trace to the "
    "request it came from (its attempt_id the x-request-id sent, or one reply of its rollout "
    "carrying its ids), or a rollout the trainer cancels",
    "adapter.single_admission": "a sample admitted to training",
    "adapter.attempt_identity": "a generation request sent to the frontend",
    "adapter.engine_token_ids": "a sample admitted from a verified reply the kit can trace to the "
    "request it came from (its attempt_id the x-request-id sent, or one reply of its rollout "
    "carrying its ids)",
    "adapter.logprob_alignment": "a sample admitted from a verified reply the kit can trace to "
    "the request it came from",
    "adapter.discovery_before_control": "a refresh that enters a control phase",
    "adapter.mutations_to_advertised": "a refresh that sends a mutating call to a worker",
    "adapter.gated_after_failure": "a refresh that cannot succeed, met by a client that calls the "
    "fleet and generates while it is open",
    "adapter.complete_iteration": "a refresh that can complete",
    "adapter.one_policy_samples": "a sample whose tokens straddle a refresh",
}
"""What would exercise each checklist item: named wherever it is skipped as never exercised."""


def skipping(check: str, why: str) -> Finding:
    """The item was never exercised in this scenario: `why`, and what would exercise it."""
    return Finding(check, SKIPPED, f"{NEVER_EXERCISED}: {why} (exercised by {EXERCISED_BY[check]})")


def _sources(evidence: Evidence, admission: Admission) -> list[AuditRecord]:
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
    found = _sources(evidence, admission)
    return found[0] if len(found) == 1 else None


def verified_terminal_only(evidence: Evidence) -> Finding:
    check = "adapter.verified_terminal_only"
    if not evidence.admissions:
        return skipping(check, "no sample was admitted in this scenario")
    traced = 0
    for admission in evidence.admissions:
        if not _sources(evidence, admission):
            return failing(
                check,
                "an admitted sample names no request the adapter sent",
                "attempt_id equal to the x-request-id of the request it came from",
                admission.sample.attempt_id,
            )
        record = source_of(evidence, admission)
        if record is None:
            continue
        traced += 1
        if not verified_terminal(record):
            return failing(
                check,
                "admitted a sample whose response was not a verified terminal success: "
                + record.summary(),
                "status 200, the whole stream delivered, a stop/length finish, then [DONE]",
                {
                    "status": record.status,
                    "delivery": record.delivery,
                    "events": len(record.events),
                },
            )
    cancelled = [s for s in evidence.generate_steps() if s.cancelled]
    for step in cancelled:
        if any(a.step == step.index for a in evidence.admissions):
            return failing(
                check,
                f"admitted a sample for slot {step.label}, which the trainer cancelled",
                "nothing admitted for a cancelled rollout",
                "a sample",
            )
    if not traced and not cancelled:
        return skipping(
            check,
            f"none of the {len(evidence.admissions)} admitted sample(s) could be traced to one "
            "request (several replies, or none, carry its identity or its ids), and no rollout "
            "was cancelled",
        )
    judged = (
        [f"{traced} admitted sample(s), each from a verified terminal response"] if traced else []
    )
    if cancelled:
        judged.append(f"nothing admitted for the {len(cancelled)} cancelled rollout(s)")
    return passing(check, "; ".join(judged))


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


def single_admission(evidence: Evidence) -> Finding:
    check = "adapter.single_admission"
    if not evidence.admissions:
        return skipping(check, "no sample was admitted in this scenario")
    per_slot: dict[int, int] = {}
    for admission in evidence.admissions:
        per_slot[admission.step] = per_slot.get(admission.step, 0) + 1
    for index, count in per_slot.items():
        if count > 1:
            label = evidence.steps[index].label
            return failing(check, f"slot {label} admitted {count} samples", "at most one", count)
    return passing(check, f"{len(per_slot)} slot(s), one admission each")


def attempt_identity(evidence: Evidence) -> Finding:
    check = "adapter.attempt_identity"
    generations = [r for r in evidence.records if r.is_generation]
    if not generations:
        return skipping(check, no_generation(evidence))
    ids = [r.headers.get("x-request-id") for r in generations]
    if any(not i for i in ids):
        missing = next(r for r in generations if not r.headers.get("x-request-id"))
        return failing(
            check,
            f"a generation carries no attempt identity: {missing.summary()}",
            "an x-request-id header on every attempt",
            None,
        )
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        slots = _slots_sent_under(evidence, repeated[0])
        if len(slots) > 1:
            return failing(
                check,
                f"rollouts {' and '.join(slots)} (each a generation of its own, as the turns of a "
                "trajectory are) were sent under one identity: a late completion of one cannot "
                "be told from the other",
                "a distinct x-request-id per generation request",
                repeated,
            )
        return failing(
            check,
            "two attempts carry the same identity: a late completion of the first cannot be told "
            "from the retry",
            "a distinct x-request-id per attempt",
            repeated,
        )
    retried = len(generations) > len(evidence.generate_steps()) + len(evidence.refresh_steps())
    return passing(
        check,
        f"{len(generations)} attempt(s), each with its own identity"
        + (" (retries seen)" if retried else ""),
    )


def history_drift(evidence: Evidence) -> Finding | None:
    """A later turn of a trajectory whose admitted prompt does not begin with the turn before's
    prompt and the ids the engine generated for it: the history was tokenized again (from its
    text, or through a chat template), so the ids trained on are not the ones the engine saw
    (THUDM/slime #117, huggingface/trl #5224). None when every turn extends the one before."""
    trajectory_of = {
        planned.slot: planned.trajectory
        for planned in evidence.scenario.steps
        if isinstance(planned, Generate) and planned.trajectory is not None
    }
    last: dict[str, Sample] = {}
    for admission in sorted(evidence.admissions, key=lambda a: a.step):
        if admission.step >= len(evidence.steps):
            continue
        trajectory = trajectory_of.get(evidence.steps[admission.step].label)
        if trajectory is None:
            continue
        before = last.get(trajectory)
        sample = admission.sample
        if before is not None:
            history = (*before.prompt_ids, *before.token_ids)
            if tuple(sample.prompt_ids[: len(history)]) != history:
                return failing(
                    "adapter.engine_token_ids",
                    f"a later turn of trajectory {trajectory!r} was sent a prompt that does not "
                    "begin with the turn before's prompt and the ids the engine generated for "
                    "it: the history was tokenized again",
                    list(history),
                    list(sample.prompt_ids[: len(history)]),
                )
        last[trajectory] = sample
    return None


def _slots_sent_under(evidence: Evidence, identity: str) -> list[str]:
    """The rollouts whose requests carried `identity`, in order."""
    return [
        step.label
        for step in evidence.generate_steps()
        if any(
            r.is_generation and r.headers.get("x-request-id") == identity
            for r in evidence.within(step)
        )
    ]


def engine_token_ids(evidence: Evidence) -> Finding:
    check = "adapter.engine_token_ids"
    generations = [r for r in evidence.records if r.is_generation]
    if not generations:
        return skipping(check, no_generation(evidence))
    for record in generations:
        body = record.body if isinstance(record.body, dict) else {}
        prompt = prompt_ids(record)
        if not (isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)):
            return failing(
                check,
                f"the prompt was not sent as token ids: {record.summary()}",
                "prompt (chat: nvext.token_data; native /generate: input_ids) as a list of "
                "token ids",
                type(prompt).__name__,
            )
        if not is_native(record) and not asks_engine_ids(body):
            return failing(
                check,
                "generated token ids were not requested from the engine: " + record.summary(),
                'nvext.extra_fields containing "completion_token_ids" (or "engine_data"), or '
                "return_tokens_as_token_ids true with logprobs (each token spelled token_id:N)",
                {
                    key: body[key]
                    for key in ("nvext", "return_tokens_as_token_ids", "logprobs")
                    if key in body
                },
            )
    traced = 0
    for admission in evidence.admissions:
        record = source_of(evidence, admission)
        if record is None or not verified_terminal(record):
            continue  # judged by attempt_identity / verified_terminal_only
        traced += 1
        engine = engine_ids(record)
        if engine is None:
            return failing(
                check,
                "admitted a sample although its reply carried no engine-returned ids "
                f"({record.summary()}): its ids were made some other way"
                + raw_payload_hazard(record),
                "no sample admitted from a reply without the engine's ids",
                list(admission.sample.token_ids),
            )
        if tuple(engine) != admission.sample.token_ids:
            return failing(
                check,
                "an admitted sample's token ids are not the engine's",
                engine,
                list(admission.sample.token_ids),
            )
        if tuple(prompt_ids(record) or ()) != admission.sample.prompt_ids:
            return failing(
                check,
                "an admitted sample's prompt ids are not those sent",
                prompt_ids(record),
                list(admission.sample.prompt_ids),
            )
    drifted = history_drift(evidence)
    if drifted is not None:
        return drifted
    if not traced:
        return skipping(
            check,
            f"{len(generations)} prompt(s) sent as ids and the engine's ids requested, but no "
            "admitted sample could be traced to a verified reply to compare its ids with"
            + ("" if evidence.admissions else " (none was admitted)"),
        )
    return passing(
        check,
        f"{len(generations)} prompt(s) sent as ids, the engine's ids requested; {traced} admitted "
        "sample(s) traced to a verified reply, each with the engine's ids",
    )


def logprob_alignment(evidence: Evidence) -> Finding:
    check = "adapter.logprob_alignment"
    if not evidence.admissions:
        return skipping(check, "no sample was admitted in this scenario")
    traced = 0
    for admission in evidence.admissions:
        sample = admission.sample
        record = source_of(evidence, admission)
        if record is None or not verified_terminal(record):
            continue  # judged by attempt_identity / verified_terminal_only
        traced += 1
        if any(value is None for value in sample.logprobs):
            return failing(
                check,
                "admitted a sample with no logprob for a generated token: it cannot be verified "
                f"({record.summary()})",
                "a number for every generated token, the engine's",
                list(sample.logprobs),
            )
        if len(sample.logprobs) != len(sample.token_ids) or not logprobs_match(
            list(sample.logprobs), record
        ):
            return failing(
                check,
                "admitted logprobs are not the engine's, one per token (compared exactly with "
                "nvext.engine_data.completion_logprobs, at float32 with the OpenAI field)",
                engine_logprobs(record) or selected_logprobs(record),
                list(sample.logprobs),
            )
        if sample.prompt_logprobs is not None and len(sample.prompt_logprobs) != len(
            sample.prompt_ids
        ):
            return failing(
                check,
                "prompt logprobs lost their alignment with the prompt (undefined positions "
                "dropped?)",
                f"{len(sample.prompt_ids)} entries, None where undefined",
                list(sample.prompt_logprobs),
            )
    if not traced:
        return skipping(
            check,
            f"none of the {len(evidence.admissions)} admitted sample(s) could be traced to a "
            "verified reply to compare its logprobs with",
        )
    return passing(
        check,
        f"{traced} admitted sample(s): logprobs are the engine's (at the precision of the field "
        "they came from), aligned with ids and prompt",
    )
