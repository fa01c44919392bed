"""The checklist items an adapter is judged on, each a pure function of one scenario's audit log,
the samples the adapter admitted and the steps it was driven through.

A check returns `pass` with what it verified, `fail` with the exchange that shows the violation,
or `skipped` when the scenario gave it nothing to judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .audit import AuditLog, AuditRecord, Delivery, Step
from .protocol import Sample
from .scenarios import Scenario

PASS, FAIL, SKIPPED = "pass", "fail", "skipped"
READ_ONLY_ROUTES = frozenset({"get_weight_version", "liveness_probe"})
PAUSE, RESUME = "pause_generation", "resume_generation"
UPDATE_PATH = frozenset({PAUSE, "update_weights_from_disk", "flush_cache", RESUME})
"""The disk-update path of the vLLM Python-worker family the certification fleet serves."""


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
    records: list[AuditRecord] = field(init=False)

    def __post_init__(self) -> None:
        self.records = self.log.records

    def within(self, step: Step) -> list[AuditRecord]:
        return [r for r in self.records if step.started <= r.started <= step.finished]

    def refresh_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "refresh"]

    def generate_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "generate"]


def _ok(check: str, message: str) -> Finding:
    return Finding(check, PASS, message)


def _fail(check: str, message: str, expected: Any, observed: Any) -> Finding:
    return Finding(check, FAIL, message, expected, observed)


def _skip(check: str, message: str) -> Finding:
    return Finding(check, SKIPPED, message)


def _completion_ids(record: AuditRecord) -> list[int] | None:
    ids: list[int] = []
    found = False
    for event in record.events:
        if isinstance(event, dict):
            got = (event.get("nvext") or {}).get("completion_token_ids")
            if got is not None:
                found = True
                ids.extend(got)
    if not found and isinstance(record.response, dict):
        choices = record.response.get("choices") or [{}]
        got = (record.response.get("nvext") or {}).get("completion_token_ids")
        got = (
            got if got is not None else (choices[0].get("nvext") or {}).get("completion_token_ids")
        )
        if got is not None:
            return list(got)
    return ids if found else None


def _selected_logprobs(record: AuditRecord) -> list[float | None]:
    out: list[float | None] = []
    for event in record.events if record.events else [record.response]:
        if isinstance(event, dict):
            for choice in event.get("choices") or []:
                out.extend((choice.get("logprobs") or {}).get("token_logprobs") or [])
    return out


def _verified_terminal(record: AuditRecord) -> bool:
    """The client received the whole response and it ends in a terminal success state."""
    if record.status != 200 or record.delivery != Delivery.COMPLETE:
        return False
    if record.events:
        if record.events[-1] != "[DONE]":
            return False
        finishes = [
            choice.get("finish_reason")
            for event in record.events
            if isinstance(event, dict)
            for choice in event.get("choices") or []
        ]
        return any(f in ("stop", "length") for f in finishes) and not any(
            isinstance(e, dict) and "error" in e for e in record.events
        )
    choices = (record.response or {}).get("choices") if isinstance(record.response, dict) else None
    return bool(choices) and choices[0].get("finish_reason") in ("stop", "length")


def _sources(evidence: Evidence, admission: Admission) -> list[AuditRecord]:
    return [
        record
        for record in evidence.records
        if record.is_generation
        and record.headers.get("x-request-id") == admission.sample.attempt_id
    ]


def source_of(evidence: Evidence, admission: Admission) -> AuditRecord | None:
    """The one request an admitted sample came from; None when its identity names no request or
    several (attempt identity is then judged by `attempt_identity`)."""
    found = _sources(evidence, admission)
    return found[0] if len(found) == 1 else None


def verified_terminal_only(evidence: Evidence) -> Finding:
    check = "adapter.verified_terminal_only"
    if not evidence.admissions:
        return _skip(check, "no sample was admitted in this scenario")
    for admission in evidence.admissions:
        if not _sources(evidence, admission):
            return _fail(
                check,
                "an admitted sample names no request the adapter sent",
                "attempt_id equal to the x-request-id of the request it came from",
                admission.sample.attempt_id,
            )
        record = source_of(evidence, admission)
        if record is None:
            continue
        if not _verified_terminal(record):
            return _fail(
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
    for step in (s for s in evidence.generate_steps() if s.cancelled):
        if any(a.step == step.index for a in evidence.admissions):
            return _fail(
                check,
                f"admitted a sample for slot {step.label}, which the trainer cancelled",
                "nothing admitted for a cancelled rollout",
                "a sample",
            )
    return _ok(
        check,
        f"{len(evidence.admissions)} admitted sample(s), each from a verified terminal response",
    )


def single_admission(evidence: Evidence) -> Finding:
    check = "adapter.single_admission"
    if not evidence.admissions:
        return _skip(check, "no sample was admitted in this scenario")
    per_slot: dict[int, int] = {}
    for admission in evidence.admissions:
        per_slot[admission.step] = per_slot.get(admission.step, 0) + 1
    for index, count in per_slot.items():
        if count > 1:
            label = evidence.steps[index].label
            return _fail(check, f"slot {label} admitted {count} samples", "at most one", count)
    return _ok(check, f"{len(per_slot)} slot(s), one admission each")


def attempt_identity(evidence: Evidence) -> Finding:
    check = "adapter.attempt_identity"
    generations = [r for r in evidence.records if r.is_generation]
    if not generations:
        return _skip(check, "no generation request was sent")
    ids = [r.headers.get("x-request-id") for r in generations]
    if any(not i for i in ids):
        missing = next(r for r in generations if not r.headers.get("x-request-id"))
        return _fail(
            check,
            f"a generation carries no attempt identity: {missing.summary()}",
            "an x-request-id header on every attempt",
            None,
        )
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        return _fail(
            check,
            "two attempts carry the same identity: a late completion of the first cannot be told "
            "from the retry",
            "a distinct x-request-id per attempt",
            repeated,
        )
    retried = len(generations) > len(evidence.generate_steps()) + len(evidence.refresh_steps())
    return _ok(
        check,
        f"{len(generations)} attempt(s), each with its own identity"
        + (" (retries seen)" if retried else ""),
    )


def engine_token_ids(evidence: Evidence) -> Finding:
    check = "adapter.engine_token_ids"
    generations = [r for r in evidence.records if r.is_generation]
    if not generations:
        return _skip(check, "no generation request was sent")
    for record in generations:
        body = record.body if isinstance(record.body, dict) else {}
        prompt = body.get("prompt")
        if not (isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)):
            return _fail(
                check,
                f"the prompt was not sent as token ids: {record.summary()}",
                "prompt as a list of token ids",
                type(prompt).__name__,
            )
        fields = ((body.get("nvext") or {}).get("extra_fields")) or []
        if "completion_token_ids" not in fields:
            return _fail(
                check,
                "generated token ids were not requested from the engine",
                'nvext.extra_fields containing "completion_token_ids"',
                fields,
            )
    for admission in evidence.admissions:
        record = source_of(evidence, admission)
        if record is None or not _verified_terminal(record):
            continue  # judged by attempt_identity / verified_terminal_only
        engine = _completion_ids(record)
        if engine is None or tuple(engine) != admission.sample.token_ids:
            return _fail(
                check,
                "an admitted sample's token ids are not the engine's",
                engine,
                list(admission.sample.token_ids),
            )
        if tuple((record.body or {}).get("prompt") or ()) != admission.sample.prompt_ids:
            return _fail(
                check,
                "an admitted sample's prompt ids are not those sent",
                (record.body or {}).get("prompt"),
                list(admission.sample.prompt_ids),
            )
    return _ok(check, "prompts sent as ids; admitted ids are the engine's completion_token_ids")


def logprob_alignment(evidence: Evidence) -> Finding:
    check = "adapter.logprob_alignment"
    if not evidence.admissions:
        return _skip(check, "no sample was admitted in this scenario")
    for admission in evidence.admissions:
        sample = admission.sample
        record = source_of(evidence, admission)
        if record is None or not _verified_terminal(record):
            continue  # judged by attempt_identity / verified_terminal_only
        selected = _selected_logprobs(record)
        if len(sample.logprobs) != len(sample.token_ids) or list(sample.logprobs) != selected:
            return _fail(
                check,
                "admitted logprobs are not the engine's, one per token",
                selected,
                list(sample.logprobs),
            )
        if sample.prompt_logprobs is not None and len(sample.prompt_logprobs) != len(
            sample.prompt_ids
        ):
            return _fail(
                check,
                "prompt logprobs lost their alignment with the prompt (undefined positions "
                "dropped?)",
                f"{len(sample.prompt_ids)} entries, None where undefined",
                list(sample.prompt_logprobs),
            )
    return _ok(check, "admitted logprobs equal the engine's, aligned with ids and prompt")


def _phases(records: list[AuditRecord]) -> list[tuple[str, int]]:
    """The control phases of one refresh in order, with the index of each phase's first call."""
    phases: list[tuple[str, int]] = []
    for index, record in enumerate(records):
        route = record.route
        if route is None or route in READ_ONLY_ROUTES:
            continue
        phase = "pause" if route == PAUSE else "resume" if route == RESUME else "update"
        if not phases or phases[-1][0] != phase:
            phases.append((phase, index))
    return phases


def _negotiated(records: list[AuditRecord]) -> str | None:
    """Before its first mutating call, a refresh holds a listing in which every worker advertises
    the whole update path ("require the complete capability set for the selected update path");
    the violation, or None."""
    mutations = _mutations(records)
    if not mutations:
        return None
    first = records.index(mutations[0])
    reads = [r for r in records[:first] if r.is_discovery]
    if not reads:
        return None  # reported as a phase without discovery
    for worker, entry in sorted(_listing(reads[-1]).items()):
        missing = sorted(UPDATE_PATH - set(entry.get("routes") or []))
        if missing:
            return (
                f"began mutating the fleet although worker {worker} does not advertise "
                + ", ".join(missing)
            )
    return None


def discovery_before_control(evidence: Evidence) -> Finding:
    check = "adapter.discovery_before_control"
    judged = 0
    for step in evidence.refresh_steps():
        records = evidence.within(step)
        unnegotiated = _negotiated(records)
        if unnegotiated is not None:
            return _fail(
                check,
                f"refresh {step.label}: {unnegotiated}",
                "the complete route set negotiated before the first mutating call",
                unnegotiated,
            )
        previous = 0
        for phase, start in _phases(records):
            if not any(r.is_discovery for r in records[previous:start]):
                return _fail(
                    check,
                    f"the {phase} phase of refresh {step.label} began without reading discovery "
                    "since the previous phase",
                    "GET /v1/rl/workers before each control phase",
                    [r.summary() for r in records[previous : start + 1]][-4:],
                )
            judged += 1
            previous = start
    if not judged:
        return _skip(check, "no control phase was entered")
    return _ok(check, f"discovery read before each of {judged} control phase(s)")


def _listing(record: AuditRecord) -> dict[str, dict[str, Any]]:
    workers = (record.response or {}).get("workers") if isinstance(record.response, dict) else None
    return {str(w.get("instance_id")): w for w in workers or [] if isinstance(w, dict)}


def _fleet_at(evidence: Evidence, step: Step) -> dict[str, dict[str, Any]]:
    """The fleet as the last discovery read before the end of `step` listed it (the adapter's
    own read, within the step or before it)."""
    reads = [r for r in evidence.records if r.is_discovery and r.started <= step.finished]
    return _listing(reads[-1]) if reads else {}


def _mutations(records: list[AuditRecord]) -> list[AuditRecord]:
    return [r for r in records if r.route is not None and r.route not in READ_ONLY_ROUTES]


def mutations_to_advertised(evidence: Evidence) -> Finding:
    check = "adapter.mutations_to_advertised"
    latest: dict[str, dict[str, Any]] = {}
    mutated = 0
    for record in evidence.records:
        if record.is_discovery:
            latest = _listing(record)
            continue
        if record.route is None or record.route in READ_ONLY_ROUTES:
            if record.plane != "rl" and not record.is_worker and "/engine/" in record.path:
                return _fail(
                    check,
                    f"an administration call went to the {record.plane}: {record.summary()}",
                    "worker system_url",
                    record.plane,
                )
            continue
        mutated += 1
        entry = latest.get(record.worker or "")
        if entry is None or entry.get("error") or not entry.get("system_url"):
            return _fail(
                check,
                "a mutating call reached a worker the latest discovery read did not offer: "
                + record.summary(),
                "a listed worker with system_url and no error",
                entry,
            )
        if record.route not in entry.get("routes", []):
            return _fail(
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
        reached = {r.worker for r in _mutations(records)}
        unreached = sorted(set(listed) - reached)
        if not listed or unreached:
            return _fail(
                check,
                f"refresh {step.label} reported success, yet advertised workers got no call "
                "through their system_url",
                sorted(listed),
                sorted(w for w in reached if w),
            )
    if not mutated:
        return _skip(check, "no mutating call was made")
    return _ok(check, f"{mutated} mutating call(s), each to an advertised system_url and route")


def _failure_point(records: list[AuditRecord]) -> AuditRecord | None:
    for record in records:
        if record.route is not None and record.route not in READ_ONLY_ROUTES:
            reply = record.response if isinstance(record.response, dict) else {}
            if record.status != 200 or reply.get("status") not in ("ok", None):
                return record
    return None


def gated_after_failure(evidence: Evidence) -> Finding:
    check = "adapter.gated_after_failure"
    refreshes = evidence.refresh_steps()
    refresh = next(iter(refreshes), None)
    if refresh is None:
        return _skip(check, "no refresh was driven")
    expected = evidence.scenario.expects(0)
    may_fail = expected is None and refresh.outcome != "returned"
    if expected is not False and not may_fail:
        return _skip(check, "the refresh of this scenario completed")
    records = evidence.within(refresh)
    failed = _failure_point(records)
    if failed is not None:
        later = records[records.index(failed) + 1 :]
        resumed = [r for r in later if r.route == RESUME]
        if resumed:
            return _fail(
                check,
                f"resumed after a failed call ({failed.summary()})",
                "no resume_generation after a failed control call",
                resumed[0].summary(),
            )
    if refresh.outcome == "returned":
        return _fail(
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
            return _fail(
                check,
                f"rollout slot {step.label} generated after the failed refresh",
                "generation gated (GenerationGated, no request)",
                [r.summary() for r in sent],
            )
    return _ok(check, f"refresh failed ({refresh.detail}); generation stayed gated")


def complete_iteration(evidence: Evidence) -> Finding:
    check = "adapter.complete_iteration"
    scenario = evidence.scenario
    steps = evidence.refresh_steps()
    judged = [
        step for position, step in enumerate(steps) if scenario.expects(position) is not False
    ]
    if not judged and any(scenario.expects(p) is False for p in range(len(steps))):
        return _skip(check, "no refresh of this scenario can complete")
    if any(
        scenario.expects(position) is None and step.outcome != "returned"
        for position, step in enumerate(steps)
    ):
        return _skip(check, "the refresh failed closed, which this scenario allows")
    if not judged:
        return _skip(check, "no refresh of this scenario can complete")
    for step in judged:
        plan = next(s for s in evidence.scenario.refreshes() if s.version == step.label)
        if step.outcome != "returned":
            return _fail(
                check,
                f"refresh {step.label} failed on a healthy fleet: {step.detail}",
                "refresh_policy returns",
                step.outcome,
            )
        records = evidence.within(step)
        listed = _fleet_at(evidence, step)
        if len(listed) != evidence.scenario.expected_workers:
            return _fail(
                check,
                "the refresh proceeded on a partial worker set",
                evidence.scenario.expected_workers,
                sorted(listed),
            )
        for worker in listed:
            calls = [r for r in records if r.worker == worker]
            order = [r.route for r in calls]
            updated = [
                r
                for r in calls
                if r.route == "update_weights_from_disk"
                and (r.body or {}).get("model_path") == plan.model_path
            ]
            needed = (PAUSE, "flush_cache", "get_weight_version", RESUME)
            if not updated or any(route not in order for route in needed):
                return _fail(
                    check,
                    f"worker {worker} did not go through the whole refresh",
                    "pause, update to the policy, flush, version read, resume",
                    order,
                )
            if order.index(PAUSE) > order.index("update_weights_from_disk") or order.index(
                RESUME
            ) < max(order.index("flush_cache"), order.index("get_weight_version")):
                return _fail(
                    check,
                    f"worker {worker}'s refresh steps are out of order",
                    "pause < update < flush, version < resume",
                    order,
                )
        last_resume = max(i for i, r in enumerate(records) if r.route == RESUME)
        verified = [r for r in records[last_resume:] if r.is_generation and _verified_terminal(r)]
        if not verified:
            return _fail(
                check,
                f"refresh {step.label} reopened without a post-update generation",
                "a verified generation after resume, before the refresh returns",
                None,
            )
    last = judged[-1]
    gated = [s for s in evidence.generate_steps() if s.index > last.index and s.outcome == "gated"]
    if gated:
        return _fail(
            check,
            f"rollout slot {gated[0].label} stayed gated after refresh {last.label} returned",
            "generation reopened once a refresh verifiably succeeded",
            gated[0].detail,
        )
    return _ok(
        check,
        f"{len(judged)} refresh(es): every worker updated, verified, generation checked",
    )
