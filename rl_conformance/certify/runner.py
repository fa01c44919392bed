"""Run an adapter through the scenarios and fold the findings into a matrix (checklist items x
adapters) in the same shape, and the same report formats, as the deployment matrix."""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from fake_backends import FakeDeployment

from ..model.capabilities import ALL, Capability, Level
from ..model.matrix import Evidence as CellEvidence
from ..model.matrix import Matrix, Outcome, RunInfo, TestRecord, build_matrix, now
from ..model.target import Target
from ..wire.exchange import to_jsonable
from .audit import WORKER_PREFIX, AuditLog, Step
from .checklist import CHECKS, judge
from .fleets import VLLM_FLEET, CertificationFleet
from .judge import FAIL, PASS, SKIPPED, Admission, Evidence, Finding
from .protocol import (
    AdapterContext,
    AdapterFactory,
    GenerationGated,
    Policy,
    RefreshFailed,
    RolloutAdapter,
    RolloutRequest,
    Sample,
)
from .proxy import RecordingProxy
from .scenarios import (
    MAX_TOKENS,
    PROMPT,
    SCENARIOS,
    Generate,
    GenerateAcross,
    Scenario,
)

MODEL = "toy"
STEP_BOUND_S = 20.0
"""No step may take longer; an adapter that hangs is reported, never waited for."""
CANCEL_WAIT_S = 5.0
DEFAULT_JOBS = 4
CHECKLIST = "Integration Checklist"

ITEMS: dict[str, tuple[str, str, str]] = {
    "adapter.verified_terminal_only": (
        "Only verified terminal results are admitted",
        "Handle Streaming and Retries",
        "Admit only a verified terminal result.",
    ),
    "adapter.single_admission": (
        "No sample is admitted twice",
        CHECKLIST,
        "Retries and cancellations cannot admit the same sample twice.",
    ),
    "adapter.attempt_identity": (
        "Retries preserve attempt identity",
        "Handle Streaming and Retries",
        "Preserve attempt identity when retrying, because a timed-out request may have completed "
        "after the client stopped waiting and generation is not idempotent.",
    ),
    "adapter.engine_token_ids": (
        "Token ids come from the engine",
        "Preserve Token Authority",
        "Do not reconstruct it by tokenizing generated text",
    ),
    "adapter.logprob_alignment": (
        "Logprobs stay aligned with token ids",
        "Preserve Token Authority",
        "Selected log probabilities match those token IDs in length and order. Prompt log "
        "probabilities preserve undefined positions instead of shifting alignment.",
    ),
    "adapter.discovery_before_control": (
        "Discovery is re-read before each control phase",
        "Discover Workers Safely",
        "Refresh discovery before each control phase and require the complete capability set "
        "for the selected update path. Do not cache membership indefinitely or interpret list "
        "position as worker identity.",
    ),
    "adapter.mutations_to_advertised": (
        "Mutations go only to advertised system URLs of selected workers",
        CHECKLIST,
        "Mutating calls use direct worker URLs on a trusted network.",
    ),
    "adapter.gated_after_failure": (
        "Generation stays gated after a failed refresh",
        "Coordinate Policy Refresh",
        "Keep generation gated when membership changes, an update fails, cache reset fails, or "
        "post-update generation does not pass.",
    ),
    "adapter.complete_iteration": (
        "One iteration includes refresh and post-update generation",
        CHECKLIST,
        "One complete training iteration includes policy refresh and post-update generation.",
    ),
}
ITEMS["adapter.one_policy_samples"] = (
    "A sample generated across a refresh is not named one policy's",
    "Handle Streaming and Retries",
    "The framework owns retry policy, duplicate suppression, partial-rollout handling, and "
    "sample acceptance.",
)
ITEM_CAPABILITIES: tuple[Capability, ...] = tuple(
    Capability(item_id, title, "adapter", Level.MUST, section, quote, dict(ALL))
    for item_id, (title, section, quote) in ITEMS.items()
)


@dataclass
class _Sink:
    current: int = -1
    admissions: list[Admission] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, sample: Sample) -> None:
        with self.lock:
            self.admissions.append(Admission(self.current, sample))


@dataclass(frozen=True)
class ScenarioResult:
    adapter: str
    scenario: Scenario
    findings: list[Finding]
    steps: list[Step]
    audit: list[dict[str, Any]]
    duration_s: float
    error: str | None = None

    @property
    def failed(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.outcome == FAIL]

    def to_json(self) -> dict[str, Any]:
        origin = self.steps[0].started if self.steps else 0.0
        return {
            "adapter": self.adapter,
            "scenario": self.scenario.name,
            "title": self.scenario.title,
            "duration_s": round(self.duration_s, 3),
            "error": self.error,
            "steps": [
                {
                    "kind": step.kind,
                    "label": step.label,
                    "outcome": step.outcome,
                    "cancelled": step.cancelled,
                    "at_s": round(step.started - origin, 4),
                    "took_s": round(step.finished - step.started, 4),
                    "detail": None if step.detail is None else str(step.detail)[:500],
                }
                for step in self.steps
            ],
            "findings": [
                {
                    "check": f.check_id,
                    "outcome": f.outcome,
                    "message": f.message,
                    "expected": to_jsonable(f.expected),
                    "observed": to_jsonable(f.observed),
                }
                for f in self.findings
            ],
            "audit": self.audit,
        }


def _bounded(call: Callable[[], Any]) -> tuple[str, Any]:
    """Run one adapter call on a daemon thread: (`returned`|`gated`|`refresh-failed`|
    `raised: ...`|`hung`, detail)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
            box["outcome"] = "returned"
        except GenerationGated as exc:
            box.update(outcome="gated", value=str(exc))
        except RefreshFailed as exc:
            box.update(outcome="refresh-failed", value=str(exc))
        except Exception as exc:
            box.update(
                outcome=f"raised: {type(exc).__name__}: {exc}", value=traceback.format_exc(limit=3)
            )

    worker = threading.Thread(target=target, daemon=True, name="certify-step")
    worker.start()
    worker.join(STEP_BOUND_S)
    if worker.is_alive():
        return "hung", f"did not return within {STEP_BOUND_S:.0f} s"
    return box["outcome"], box.get("value")


def _drive(adapter: RolloutAdapter, scenario: Scenario, log: AuditLog, sink: _Sink) -> list[Step]:
    steps: list[Step] = []
    for planned in scenario.steps:
        index = len(steps)
        sink.current = index
        started = time.monotonic()
        detail: Any
        if isinstance(planned, GenerateAcross):
            steps.extend(_overlapped(adapter, planned, log, index, started))
            log.steps = steps
            continue
        if isinstance(planned, Generate):
            request = RolloutRequest(planned.slot, PROMPT, MAX_TOKENS)
            cancelled = False
            if planned.cancel_after_events is not None:
                outcome, detail, cancelled = _cancelled(
                    adapter, request, planned.cancel_after_events, log, started
                )
            else:
                outcome, detail = _bounded(lambda r=request: adapter.generate(r))
            kind, label = "generate", planned.slot
        else:
            cancelled = False
            policy = Policy(planned.version, planned.model_path)
            outcome, detail = _bounded(lambda p=policy: adapter.refresh_policy(p))
            kind, label = "refresh", planned.version
        time.sleep(0.02)  # let the proxy finish recording what the step sent
        steps.append(
            Step(index, kind, label, started, time.monotonic(), outcome, detail, cancelled)
        )
        log.steps = steps
    return steps


def _overlapped(
    adapter: RolloutAdapter, planned: GenerateAcross, log: AuditLog, index: int, since: float
) -> list[Step]:
    """The rollout on its own thread, the refresh once its first event reached the client (or it
    returned first); both bounded. Two steps, the rollout's first: admissions belong to it."""
    request = RolloutRequest(planned.slot, PROMPT, MAX_TOKENS)
    result: dict[str, Any] = {}
    finished: dict[str, float] = {}

    def rollout() -> None:
        result.update(
            zip(("outcome", "value"), _bounded(lambda: adapter.generate(request)), strict=True)
        )
        finished["at"] = time.monotonic()

    thread = threading.Thread(target=rollout, daemon=True, name="certify-rollout")
    thread.start()
    deadline = time.monotonic() + CANCEL_WAIT_S
    while log.events_delivered(since) < 1 and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.01)
    policy = Policy(planned.refresh.version, planned.refresh.model_path)
    refresh_started = time.monotonic()
    outcome, detail = _bounded(lambda: adapter.refresh_policy(policy))
    refresh = Step(
        index + 1,
        "refresh",
        planned.refresh.version,
        refresh_started,
        time.monotonic(),
        outcome,
        detail,
    )
    thread.join(STEP_BOUND_S)
    time.sleep(0.02)  # let the proxy finish recording what the steps sent
    generate = Step(
        index,
        "generate",
        planned.slot,
        since,
        finished.get("at", time.monotonic()),
        result.get("outcome", "hung"),
        result.get("value"),
    )
    return [generate, refresh]


def _cancelled(
    adapter: RolloutAdapter, request: RolloutRequest, after: int, log: AuditLog, since: float
) -> tuple[str, Any, bool]:
    """Cancel the rollout once `after` events reached the client; whether the cancellation
    came while the call was still running (an adapter that had already returned was not
    cancelled)."""
    result: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: result.update(
            zip(("outcome", "value"), _bounded(lambda: adapter.generate(request)), strict=True)
        ),
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + CANCEL_WAIT_S
    while log.events_delivered(since) < after and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.01)
    in_flight = thread.is_alive()
    request.cancel.cancel()
    thread.join(STEP_BOUND_S)
    outcome = result.get("outcome", "hung")
    return outcome, result.get("value"), in_flight


def run_scenario(
    name: str,
    factory: AdapterFactory,
    scenario: Scenario,
    fleet: CertificationFleet = VLLM_FLEET,
) -> ScenarioResult:
    started = time.monotonic()
    unsupported = scenario.unsupported(fleet)
    if unsupported is not None:
        return _not_run(name, scenario, f"not run on the {fleet.name} fleet: {unsupported}")
    log = AuditLog()
    sink = _Sink()
    supplied: dict[str, str] = {}
    with FakeDeployment(fleet.backend, workers=scenario.workers, **fleet.options) as deployment:
        upstreams = {"frontend": deployment.frontend_url, "rl": deployment.rl_url}
        for worker in deployment.workers:
            upstreams[f"{WORKER_PREFIX}{worker['instance_id']}"] = worker["system_url"]
        with RecordingProxy(upstreams, scenario.injection(fleet), log) as proxy:
            if not fleet.discovered:
                supplied = {
                    str(worker["instance_id"]): proxy.url(f"{WORKER_PREFIX}{worker['instance_id']}")
                    for worker in deployment.workers
                }
            context = AdapterContext(
                frontend_url=proxy.url("frontend"),
                rl_url=proxy.url("rl"),
                model=MODEL,
                sink=sink,
                expected_workers=scenario.expected_workers,
                request_timeout_s=scenario.request_timeout_s,
                family=fleet.name,
                worker_urls=tuple(supplied.values()),
            )
            try:
                adapter = factory(context)
            except Exception as exc:
                return ScenarioResult(
                    name,
                    scenario,
                    [],
                    [],
                    [],
                    time.monotonic() - started,
                    f"the factory raised {type(exc).__name__}: {exc}",
                )
            try:
                steps = _drive(adapter, scenario, log, sink)
            finally:
                _bounded(adapter.close)
            time.sleep(scenario.request_timeout_s if _held(scenario) else 0.0)
    evidence = Evidence(scenario, log, steps, list(sink.admissions), fleet, supplied)
    origin = steps[0].started if steps else 0.0
    audit = [record.to_json(origin) for record in log.records]
    return ScenarioResult(name, scenario, judge(evidence), steps, audit, time.monotonic() - started)


def _not_run(adapter: str, scenario: Scenario, reason: str) -> ScenarioResult:
    """A scenario the fleet cannot stage: every item skipped, naming why."""
    findings = [Finding(check, SKIPPED, reason) for check in CHECKS]
    return ScenarioResult(adapter, scenario, findings, [], [], 0.0)


def _held(scenario: Scenario) -> bool:
    return scenario.name == "late_completion"


def certify(
    adapters: dict[str, AdapterFactory],
    scenarios: Sequence[Scenario] = SCENARIOS,
    progress: Callable[[str], None] | None = None,
    jobs: int = DEFAULT_JOBS,
    fleet: CertificationFleet = VLLM_FLEET,
) -> tuple[Matrix, list[ScenarioResult]]:
    """Every adapter through every scenario on `fleet`. Scenarios are independent (each has its
    own deployment and proxy) and mostly wait on timers, so `jobs` of them run at once."""
    started = now()
    pairs = [
        (name, factory, scenario) for name, factory in adapters.items() for scenario in scenarios
    ]

    def one(pair: tuple[str, AdapterFactory, Scenario]) -> ScenarioResult:
        name, factory, scenario = pair
        result = run_scenario(name, factory, scenario, fleet)
        if progress is not None:
            failed = [f.check_id for f in result.failed]
            progress(
                f"{name} {scenario.name}: "
                + (", ".join(failed) if failed else result.error or "ok")
            )
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="certify") as pool:
        results = list(pool.map(one, pairs))
    targets = [
        Target(
            id=name,
            backend=fleet.backend,
            kind="fake",
            frontend_url="certification fleet",
            model=MODEL,
            notes=[
                f"adapter certification: scenarios over a recorded fake {fleet.name} fleet",
                *fleet.notes,
            ],
        )
        for name in adapters
    ]
    records = [record for result in results for record in _records(result)]
    return build_matrix(
        ITEM_CAPABILITIES, targets, records, RunInfo(started, now(), True, 0)
    ), results


def _records(result: ScenarioResult) -> list[TestRecord]:
    if result.error is not None:
        return [
            TestRecord(
                f"{result.scenario.name}::{check}",
                (check,),
                result.adapter,
                Outcome.ERROR,
                result.error,
            )
            for check in CHECKS
        ]
    out = []
    for finding in result.findings:
        outcome = {PASS: Outcome.PASS, FAIL: Outcome.FAIL}.get(finding.outcome, Outcome.SKIPPED)
        evidence = []
        if finding.outcome == FAIL:
            evidence.append(
                CellEvidence(
                    finding.check_id,
                    f"{result.scenario.name}: {finding.message}",
                    expected=finding.expected,
                    observed=finding.observed,
                )
            )
        out.append(
            TestRecord(
                f"{result.scenario.name}::{finding.check_id}",
                (finding.check_id,),
                result.adapter,
                outcome,
                f"{result.scenario.name}: {finding.message}",
                result.duration_s / max(len(result.findings), 1),
                [(finding.check_id, finding.outcome != FAIL)],
                evidence,
                measured=_measured(result, finding),
            )
        )
    return out


def _measured(result: ScenarioResult, finding: Finding) -> dict[str, Any]:
    """What a passed complete iteration established, for the adapter's run record."""
    if finding.check_id != "adapter.complete_iteration" or finding.outcome != PASS:
        return {}
    versions = [step.version for step in result.scenario.refreshes()]
    workers = result.scenario.expected_workers
    return {
        "policy_update": {
            "target_version": versions[-1] if versions else "",
            "workers_targeted": workers,
            "workers_verified": workers,
        }
    }
