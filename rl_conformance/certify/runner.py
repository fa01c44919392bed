"""Run an adapter through the scenarios and fold the findings into a matrix (checklist items x
adapters) in the same shape, and the same report formats, as the deployment matrix."""

from __future__ import annotations

import asyncio
import inspect
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fake_backends import FakeDeployment

from ..contract.adapter import BY_ID as ITEMS_BY_ID
from ..contract.adapter import COMPLETE_ITERATION, ITEMS
from ..model import exits, stops
from ..model.capabilities import Capability
from ..model.matrix import Evidence as CellEvidence
from ..model.matrix import ExitRule, Matrix, Outcome, RunInfo, TestRecord, build_matrix, now
from ..model.target import Target
from ..wire.exchange import to_jsonable
from .audit import WORKER_PREFIX, AuditLog, Step
from .checklist import judge
from .driving import AdapterHandle, Driver, awaited, bounded, claims
from .evidence import Admission, Evidence
from .findings import NEVER_EXERCISED, Finding
from .fleets import VLLM_FLEET, CertificationFleet
from .protocol import GENERATION, REFRESH, AdapterContext, AdapterFactory, Sample
from .proxy import RecordingProxy
from .replay import evidence_to_json
from .scenarios import SCENARIOS, Refresh, Scenario

DEFAULT_JOBS = 4
ITEM_CAPABILITIES: tuple[Capability, ...] = tuple(item.row for item in ITEMS)
"""The rows of the adapter matrix: the checklist's items (`contract.adapter`)."""


@dataclass
class _Sink:
    current: int = -1
    admissions: list[Admission] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def at(self, step: int) -> None:
        """Admissions from now on belong to this step."""
        self.current = step

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
    evidence: dict[str, Any] | None = None
    """The scenario's whole evidence (`replay`), from which its findings can be judged again."""
    not_run: str | None = None
    """Why the scenario was not run for this adapter (its fleet cannot stage it for what the
    adapter implements, or it cannot judge the adapter), or None."""

    @property
    def failed(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.outcome == Outcome.FAIL]

    def to_json(self) -> dict[str, Any]:
        origin = self.steps[0].started if self.steps else 0.0
        return {
            "adapter": self.adapter,
            "scenario": self.scenario.name,
            "title": self.scenario.title,
            "duration_s": round(self.duration_s, 3),
            "error": self.error,
            "not_run": self.not_run,
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


def run_scenario(
    name: str,
    factory: AdapterFactory,
    scenario: Scenario,
    fleet: CertificationFleet = VLLM_FLEET,
) -> ScenarioResult:
    started = time.monotonic()
    unstageable = scenario.injection.unsupported(fleet)
    declared = _declared(factory)
    if (
        declared is not None
        and (reason := scenario.unsupported_given(unstageable, declared)) is not None
    ):
        return _not_run(name, scenario, f"not run on the {fleet.name} fleet: {reason}", declared)
    log = AuditLog()
    sink = _Sink()
    supplied: dict[str, str] = {}
    implements = frozenset({GENERATION, REFRESH})
    with (
        tempfile.TemporaryDirectory(prefix="rl-conformance-checkpoints-") as checkpoints,
        FakeDeployment(
            fleet.backend, workers=scenario.workers, model=fleet.model, **fleet.options
        ) as deployment,
    ):
        upstreams = {"frontend": deployment.frontend_url, "rl": deployment.rl_url}
        for worker in deployment.workers:
            upstreams[f"{WORKER_PREFIX}{worker['instance_id']}"] = worker["system_url"]
        injection = scenario.injection(fleet)
        with RecordingProxy(upstreams, injection, log) as proxy:
            if not fleet.discovered:
                supplied = {
                    str(worker["instance_id"]): proxy.url(f"{WORKER_PREFIX}{worker['instance_id']}")
                    for worker in deployment.workers
                }
            context = AdapterContext(
                frontend_url=proxy.url("frontend"),
                rl_url=proxy.url("rl"),
                model=fleet.model,
                sink=sink,
                expected_workers=scenario.expected_workers,
                request_timeout_s=scenario.request_timeout_s,
                family=fleet.name,
                worker_urls=tuple(supplied.values()),
            )
            outcome, built = bounded(lambda: factory(context))
            if outcome != "returned":
                return _could_not_run(name, scenario, _factory_failure(outcome, built), started)
            try:
                handle = AdapterHandle(built)
            except ValueError as exc:
                bounded(lambda: _close_undriven(built))
                return _could_not_run(name, scenario, f"the adapter's {exc}", started)
            implements = handle.implements
            unstaged = scenario.unsupported_given(unstageable, implements)
            if unstaged is not None:
                handle.close()
                reason = f"not run on the {fleet.name} fleet: {unstaged}"
                return _not_run(name, scenario, reason, implements)
            inapplicable = scenario.applies_to(implements)
            if inapplicable is not None:
                handle.close()
                return _not_run(name, scenario, f"not run: {inapplicable}", implements)
            injection.arm()  # the scenario's events begin once the adapter has started

            def checkpoint(planned: Refresh) -> str:
                path = Path(checkpoints) / planned.checkpoint
                path.mkdir(exist_ok=True)
                return str(path)

            try:
                steps = Driver(handle, scenario, log, sink.at, checkpoint).drive()
            finally:
                handle.close()
            time.sleep(scenario.request_timeout_s if _held(scenario) else 0.0)
        root = checkpoints
    evidence = Evidence(
        scenario, log, steps, list(sink.admissions), fleet, supplied, root, implements
    )
    origin = steps[0].started if steps else 0.0
    audit = [record.to_json(origin) for record in log.records]
    return ScenarioResult(
        name,
        scenario,
        judge(evidence),
        steps,
        audit,
        time.monotonic() - started,
        evidence=evidence_to_json(evidence, name),
    )


def _declared(factory: AdapterFactory) -> frozenset[str] | None:
    """What a factory that is a class declares it implements (`implements` on the class), or
    None where only the adapter it builds can say (a function, or a class that declares
    nothing: its instances may)."""
    if not inspect.isclass(factory) or getattr(factory, "implements", None) is None:
        return None
    try:
        return claims(factory)
    except ValueError:
        return None  # reported once the adapter is built


def _close_undriven(adapter: Any) -> None:
    """Close an adapter the kit will not drive, whether its `close` is a coroutine or not."""
    closing = getattr(adapter, "close", lambda: None)()
    if inspect.isawaitable(closing):
        asyncio.run(awaited(closing))


def _factory_failure(outcome: str, detail: Any) -> str:
    if outcome == "hung":
        return f"the factory {detail}"
    if outcome in ("gated", "refresh-failed"):
        return f"the factory raised: {detail}"
    return f"the factory {outcome}"


def _could_not_run(adapter: str, scenario: Scenario, reason: str, started: float) -> ScenarioResult:
    """The adapter could not be driven through this scenario: every item skipped for it (the
    other scenarios' verdicts stand), the reason recorded as the scenario's error."""
    findings = [Finding(item.id, Outcome.SKIPPED, f"not judged: {reason}") for item in ITEMS]
    return ScenarioResult(adapter, scenario, findings, [], [], time.monotonic() - started, reason)


def _not_run(
    adapter: str,
    scenario: Scenario,
    reason: str,
    implements: frozenset[str] = frozenset({GENERATION, REFRESH}),
) -> ScenarioResult:
    """A scenario the fleet cannot stage, or that cannot judge the adapter: every item it claims
    skipped, naming why (the others not applicable, as everywhere)."""
    findings = [
        Finding(item.id, Outcome.SKIPPED, reason)
        if item.half in implements
        else Finding(item.id, Outcome.NOT_APPLICABLE, f"the adapter does not implement {item.half}")
        for item in ITEMS
    ]
    return ScenarioResult(adapter, scenario, findings, [], [], 0.0, not_run=reason)


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
                + (", ".join(failed) if failed else result.error or result.not_run or "ok")
            )
        return result

    results, stopped = _run_all(one, pairs, jobs, progress)
    targets = [
        Target(
            id=name,
            backend=fleet.backend,
            kind="fake",
            frontend_url="certification fleet",
            model=fleet.model,
            notes=[
                f"adapter certification: scenarios over a recorded fake {fleet.name} fleet",
                *fleet.notes,
            ],
        )
        for name in adapters
    ]
    records = [record for result in results for record in _records(result)]
    info = RunInfo(started, now(), stopped is None, 0, incomplete_reason=stopped)
    matrix = build_matrix(ITEM_CAPABILITIES, targets, records, info)
    mark_never_exercised(matrix)
    whole = {s.name for s in scenarios} >= {s.name for s in SCENARIOS}
    matrix.exit_rule = ExitRule(failing=CERTIFY_FAILING if whole else PARTIAL_FAILING)
    return matrix, results


def _run_all(
    one: Callable[[Any], ScenarioResult],
    pairs: Sequence[Any],
    jobs: int,
    progress: Callable[[str], None] | None,
) -> tuple[list[ScenarioResult], str | None]:
    """Every pair, `jobs` at once; on a stop (Ctrl-C, SIGTERM) the pairs not started are left
    out and those running end (each scenario is bounded by its deadlines), so what was judged
    is kept: the results in the pairs' order, and the stop's reason (None: none came)."""
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="certify")
    futures = [pool.submit(one, pair) for pair in pairs]
    stopped = None
    try:
        for future in futures:
            future.exception()
    except KeyboardInterrupt:
        stopped = (
            exits.SIGTERM_REASON if stops.received() == signal.SIGTERM else (exits.SIGINT_REASON)
        )
        running = sum(1 for future in futures if future.running())
        if progress is not None:
            progress(
                f"interrupted: {running} scenario(s) running end first (each bounded), then "
                "what was judged is written"
            )
    finally:
        with stops.ending():
            pool.shutdown(wait=True, cancel_futures=True)
    done = [future for future in futures if future.done() and not future.cancelled()]
    return [future.result() for future in done], stopped


CERTIFY_FAILING = (Outcome.FAIL, Outcome.ERROR, Outcome.SKIPPED)
"""An adapter is certified only on evidence: an item it claims that no scenario exercised (its
cell `skipped`) fails the run as a `fail` does; an item it does not claim is `unsupported`."""
PARTIAL_FAILING = (Outcome.FAIL, Outcome.ERROR)
"""A run of chosen scenarios is no certificate: what they did not exercise is reported, and
only a `fail` or `error` decides."""


def mark_never_exercised(matrix: Matrix) -> None:
    """Say of every `skipped` cell that no scenario exercised the item, what would have, and why
    the first scenario did not."""
    for row in matrix.rows:
        item = ITEMS_BY_ID.get(row.capability.id)
        what = item.exercised_by if item is not None else ""
        for cell in row.cells.values():
            if cell.outcome is not Outcome.SKIPPED or cell.reason.startswith(NEVER_EXERCISED):
                continue
            named = "exercised by" in cell.reason or not what
            first = cell.reason.replace(f": {NEVER_EXERCISED}: ", ": ", 1)
            cell.reason = (
                f"{NEVER_EXERCISED} (no scenario gave evidence"
                + ("" if named else f"; exercised by {what}")
                + f"): {first}"
            )


CELL_OUTCOME = {
    Outcome.PASS: Outcome.PASS,
    Outcome.FAIL: Outcome.FAIL,
    Outcome.NOT_APPLICABLE: Outcome.UNSUPPORTED,
}
"""A finding's outcome -> its test record's (any other: `skipped`)."""


def _records(result: ScenarioResult) -> list[TestRecord]:
    out = []
    for finding in result.findings:
        outcome = CELL_OUTCOME.get(finding.outcome, Outcome.SKIPPED)
        evidence = []
        if finding.outcome == Outcome.FAIL:
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
                [(finding.check_id, finding.outcome == Outcome.PASS)]
                if finding.outcome in (Outcome.PASS, Outcome.FAIL)
                else [],
                evidence,
                measured=_measured(result, finding),
            )
        )
    return out


def _measured(result: ScenarioResult, finding: Finding) -> dict[str, Any]:
    """What a passed complete iteration established, for the adapter's run record."""
    if finding.check_id != COMPLETE_ITERATION.id or finding.outcome != Outcome.PASS:
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
