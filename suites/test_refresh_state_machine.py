"""Policy refresh, the lifecycle: random orders of its steps against the live fleet (a Hypothesis
state machine); nothing is admitted while gated, and the fleet reopens only after every
checkable step passed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from rl_conformance import contract
from rl_conformance.checks import control
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import (
    await_rejoin,
    require_update_routes,
    routed_now,
    select,
)
from rl_conformance.control.each_worker import at_once
from rl_conformance.control.families import AdminFamily, family_for
from rl_conformance.control.refresh import Coordinator, StepResult
from rl_conformance.control.refresh_probes import generate_ids
from rl_conformance.control.weights import WeightSource
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating


class RefreshLifecycle(RuleBasedStateMachine):
    """Random orders of the lifecycle's steps against the live fleet. Invariants: nothing is
    admitted while gated; the fleet never reopens after a failed step; and every deployment step
    that the spec makes checkable (update, version, post-update generation) is checked."""

    context: dict[str, Any] = {}

    def __init__(self) -> None:
        super().__init__()
        context = type(self).context
        self.client: Client = context["client"]
        self.target: Target = context["target"]
        self.verdict: Verdict = context["verdict"]
        self.admin: AdminClient = context["admin"]
        self.family: AdminFamily = context["family"]
        self.weights: WeightSource = context["weights"]
        self.coordinator = Coordinator(self.admin, self.family, list(context["workers"]))
        self.judged: list[AdminWorker] = list(context["judged"])
        """The workers whose generations are read (the run's sample: the version, read on
        every worker, is what the spec asks of each)."""
        self.paused = False
        self.routed_before: set[int] | None = None
        self.applied: str | None = None
        self.verified = False
        self.generated = False
        self.baseline: dict[str, list[int]] = {}
        self.baseline_paths: set[str | None] = set()
        self.unknown_before: set[str] = set()

    @initialize()
    def one_complete_refresh(self) -> None:
        """Every example starts with the canonical order, so each run exercises the whole path;
        the rules then explore other orders."""
        self.gate()
        self.pause()
        self.update()
        if self.family.flush is not None:
            self.flush()
        if self.family.version is not None:
            self.verify()
        self.resume_engines()
        self.post_update_generation()
        self.reopen()

    @rule()
    def gate(self) -> None:
        self.coordinator.gate()
        self.applied, self.verified, self.generated = None, False, False

    @rule()
    def rollout_asks_admission(self) -> None:
        if self.coordinator.admit() and self.coordinator.gated:
            self.coordinator.admitted_while_gated += 1

    @precondition(lambda self: self.coordinator.gated and not self.paused)
    @rule()
    def pause(self) -> None:
        if self.applied is None:  # the baseline is what served before this refresh's update
            generated = at_once(self.generate_on, self.judged)
            for worker, (ids, _) in zip(self.judged, generated, strict=True):
                self.baseline[worker.label] = ids
            self.baseline_paths = self.weights.holding(self.coordinator.workers)
            self.unknown_before = {
                worker.label
                for worker in self.coordinator.workers
                if None in self.weights.holding([worker])
            }
        self.paused = True  # whatever the replies say, teardown must resume
        self.routed_before = routed_now(self.admin, self.target)
        for step in self.coordinator.call_all("pause", self.family.pause, self.family.pause_body()):
            self.verdict.check(step.result, step.exchange)

    @precondition(lambda self: self.paused)
    @rule()
    def update(self) -> None:
        weights = self.weights.new(self.family, self.coordinator.workers, self.baseline_paths)

        def update_one(worker: AdminWorker) -> list[StepResult]:
            """One worker's calls in order; the workers at once."""
            calls = self.family.update_calls(weights)
            if self.weights.needs_setup(worker):
                calls = self.family.setup_calls(weights) + calls
            return [
                self.coordinator.call_one("update", worker, call.route, dict(call.body))
                for call in calls
            ]

        for worker, steps in zip(
            self.coordinator.workers,
            at_once(update_one, self.coordinator.workers),
            strict=True,
        ):
            if self.weights.needs_setup(worker):
                self.weights.setup_done(worker)
            for step in steps:
                self.verdict.check(step.result, step.exchange)
            self.weights.loaded([worker], weights)
        self.applied, self.verified, self.generated = weights.version, False, False

    @precondition(lambda self: self.paused and self.family.flush is not None)
    @rule()
    def flush(self) -> None:
        assert self.family.flush is not None
        for step in self.coordinator.call_all("flush", self.family.flush, {}):
            self.verdict.check(step.result, step.exchange)

    @precondition(lambda self: self.applied is not None and self.family.version is not None)
    @rule()
    def verify(self) -> None:
        assert self.family.version is not None
        reported = {}
        for step in self.coordinator.call_all("verify", self.family.version, {}):
            try:
                reported[step.worker] = self.family.read_version(step.exchange.json())  # type: ignore[union-attr]
            except (ValueError, AttributeError):
                reported[step.worker] = None
        result = control.version_verified(self.applied, reported)
        if not result.passed:
            self.coordinator.failures.append("version verification failed")
        self.verdict.check(result)
        self.verified = True

    @precondition(lambda self: self.paused)
    @rule()
    def resume_engines(self) -> None:
        self.paused = False
        for step in self.coordinator.call_all("resume", self.family.resume, {}):
            self.verdict.check(step.result, step.exchange)
        await_rejoin(self.admin, self.target, self.routed_before, self.coordinator.workers[0])

    @precondition(lambda self: not self.paused and self.applied is not None)
    @rule()
    def post_update_generation(self) -> None:
        generated = at_once(self.generate_on, self.judged)
        for worker, (after, seen) in zip(self.judged, generated, strict=True):
            if after == self.baseline.get(worker.label) and worker.label in self.unknown_before:
                # It may have held the checkpoint sent: the run did not know what it held
                # (later examples, which know, judge it).
                continue
            result = control.post_update_generation(
                self.baseline.get(worker.label, []), after, seen, self.applied
            )
            if not result.passed:
                self.coordinator.failures.append(f"post-update generation on {worker.label}")
            self.verdict.check(result)
        self.generated = True

    @precondition(lambda self: self.coordinator.gated and not self.paused)
    @rule()
    def reopen(self) -> None:
        ready = self.applied is None or (
            self.generated and (self.verified or self.family.version is None)
        )
        if not ready:
            self.coordinator.failures.append("reopen attempted before verification")
        reopened = self.coordinator.reopen()
        assert not (reopened and self.coordinator.failures), "reopened despite a failed step"
        self.coordinator.failures = []

    def generate_on(self, worker: AdminWorker) -> tuple[list[int], Any]:
        return generate_ids(self.verdict, self.client, self.target, worker)

    @invariant()
    def nothing_admitted_while_gated(self) -> None:
        assert self.coordinator.admitted_while_gated == 0

    def teardown(self) -> None:
        if self.paused:
            for worker in self.coordinator.workers:
                try:
                    self.admin.call(worker, self.family.resume, {})
                except Exception:
                    continue
            await_rejoin(self.admin, self.target, self.routed_before, self.coordinator.workers[0])


@capability(contract.refresh.LIFECYCLE)
def test_refresh_lifecycle_state_machine(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    require_update_routes(chosen)
    rl_weights.require(chosen.family)
    family = chosen.family
    workers = [w for w in rl_admin_workers if family_for(rl_target, w) is family]
    judged = [w for w in workers if w in chosen.judged] or workers
    RefreshLifecycle.context = {
        "client": rl_client,
        "target": rl_target,
        "verdict": rl_verdict,
        "admin": rl_admin,
        "family": family,
        "workers": workers,
        "judged": judged,
        "weights": rl_weights,
    }
    run_state_machine_as_test(
        a_refresh_lifecycle,
        settings=settings(
            settings.default,
            max_examples=max(2, settings.default.max_examples // 2),
            stateful_step_count=8,
            deadline=None,
            database=None,
        ),
    )
    if chosen.sampled:
        rl_verdict.measure(
            judged_workers=chosen.sample.judged(
                [worker.label for worker in judged], len(workers), every_for="the version"
            )
        )


def a_refresh_lifecycle() -> RefreshLifecycle:
    """The machine, made by a function: hypothesis digests the source of what makes it, and
    finding a class's source parses its whole module (14 ms a test), a function's does not."""
    return RefreshLifecycle()
