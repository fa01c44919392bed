"""The generation budget inside a run: the plan of what runs (`budget.choose`), the skips it
decides, the examples each property test is given, and the refusal that stops a mutating test of
a read-only run before its first generation request. Registered by `ConformanceRun` as a plugin
of its own; the run's state is on `config.stash` (`state.py`)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from ..client.budget import (
    BASIS,
    FEWEST_EXAMPLES,
    LEVEL_ORDER,
    PlannedTest,
    choose,
    plan_document,
    plan_test,
    uncovered_reason,
)
from ..launchers.run_plan import RunPlan
from ..model import capabilities as capability_registry
from ..model.config import RunConfig
from ..model.mutations import MutationPolicy
from ..redaction import write_text
from .collection import capabilities_of, target_of
from .state import RunState, state_of

PLANNED: pytest.StashKey[PlannedTest] = pytest.StashKey()
FEWER_EXAMPLES_PROFILE = "rl-conformance-run-fewer-examples"


def refusal(policy: MutationPolicy) -> str:
    """Why a mutating test of a target the run may not change sends no generation request."""
    return (
        f"{policy.describe()}: a mutating test is stopped before its first generation request "
        f"(use {policy.how})"
    )


def plan(items: Sequence[pytest.Item], run_plan: RunPlan) -> list[PlannedTest]:
    """Each collected test with its level and estimate, chosen under the run's budget."""
    run = run_plan.config
    read_only = run_plan.read_only_targets()
    planned = []
    for item in items:
        marked = capabilities_of(item)
        levels = [
            capability_registry.BY_ID[c].level.value
            for c in marked
            if c in capability_registry.BY_ID
        ]
        target = target_of(item)
        mutating = item.get_closest_marker("mutating") is not None
        planned.append(
            plan_test(
                item.nodeid,
                target,
                marked,
                min(levels, key=lambda level: LEVEL_ORDER.get(level, 3), default="MAY"),
                run.examples,
                read_only=mutating and target in read_only,
            )
        )
    return choose(planned, run.budget_generations)


def prepare(
    items: Sequence[pytest.Item], planned: Sequence[PlannedTest], budget: int | None
) -> None:
    """Each test keeps its plan; the tests the budget does not cover are skipped (their cells
    say so), not dropped: a parallel run's controller learns of them from their reports."""
    for item, test in zip(items, planned, strict=True):
        item.stash[PLANNED] = test
        if budget is not None and not test.selected:
            item.add_marker(pytest.mark.skip(reason=uncovered_reason(test, budget)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    planned = item.stash.get(PLANNED, None)
    state = state_of(item.config)
    with _refusing(state, planned), _examples(item, planned):
        yield


@contextlib.contextmanager
def _refusing(state: RunState, planned: PlannedTest | None) -> Iterator[None]:
    """A mutating test of a read-only run reads what it may (discovery, a worker's routes,
    which decide `unsupported` and `not-advertised`), but its first generation request is
    refused: it is skipped before the fleet generates for a test that cannot judge."""
    client = state.client
    if planned is None or not planned.read_only or client is None:
        yield
        return
    client.refusal = refusal(state.run.policy_of(planned.target_id))
    try:
        yield
    finally:
        client.refusal = None


@contextlib.contextmanager
def _examples(item: pytest.Item, planned: PlannedTest | None) -> Iterator[None]:
    """A property test runs with the run's profile at the examples its plan gives it: the
    `@given` test's own settings for this call (they were fixed when its module was imported,
    perhaps by an earlier run in this process), and the default profile for tests that read it
    when they run (a state machine)."""
    function = getattr(item, "obj", None)
    given = bool(getattr(function, "is_hypothesis_test", False))
    fewer = planned.examples if planned is not None else None
    if not given and fewer is None:
        yield
        return
    from hypothesis import settings

    profile = settings.get_current_profile_name()
    run_settings = settings.default
    assert run_settings is not None
    wanted = run_settings
    if fewer is not None and fewer < run_settings.max_examples:
        wanted = settings(run_settings, max_examples=max(1, fewer))
    saved = getattr(function, "_hypothesis_internal_use_settings", None)
    try:
        if given:
            function._hypothesis_internal_use_settings = wanted  # type: ignore[union-attr]
        if wanted is not run_settings:
            settings.register_profile(FEWER_EXAMPLES_PROFILE, wanted)
            settings.load_profile(FEWER_EXAMPLES_PROFILE)
        yield
    finally:
        if given:
            function._hypothesis_internal_use_settings = saved  # type: ignore[union-attr]
        if wanted is not run_settings:
            settings.load_profile(profile)


def write_plan(state: RunState, run: RunConfig) -> None:
    document = plan_document(state.plan, run.budget_generations, run.examples)
    run.report_path.mkdir(parents=True, exist_ok=True)
    write_text(run.report_path / "plan.json", json.dumps(document, indent=2) + "\n")


def show_plan(reporter: Any, state: RunState, run: RunConfig) -> None:
    """The dry run's listing: each test with its level and estimated generations, per target
    the totals and what covering every capability once costs."""
    document = plan_document(state.plan, run.budget_generations, run.examples)
    reporter.section("dry run: what would run")
    for test in state.plan:
        mark = "run " if test.selected else "skip"
        note = ""
        if test.read_only:
            note = "  (read-only run: stopped before its first generation)"
        elif test.examples is not None and test.selected and test.examples < run.examples:
            note = f"  ({test.examples} of {run.examples} examples)"
        reporter.write_line(
            f"{mark} {test.level:<6} ~{test.estimated:>4} gen  {test.nodeid}"
            f"  [{', '.join(test.capabilities)}]{note}"
        )
    budget = run.budget_generations
    for target_id, totals in document["targets"].items():
        cover = totals["coverage"]
        line = (
            f"{target_id}: {totals['tests']} tests, ~{totals['estimated_generations']} "
            f"generation requests (--examples {run.examples}); one test per capability "
            f"({cover['capabilities']} capabilities, {cover['tests']} tests): "
            f"~{cover['generations']} (~{cover['generations_fewest_examples']} with property "
            f"tests at {FEWEST_EXAMPLES} examples)"
        )
        if budget is not None:
            line += (
                f"; --budget-generations {budget} covers {totals['selected']} tests "
                f"(~{totals['selected_generations']}), leaves "
                f"{totals['tests'] - totals['selected']} uncovered"
            )
            left = totals["uncovered_capabilities"]
            if left:
                line += f"; capabilities left uncovered: {', '.join(left)}"
        reporter.write_line(line)
    reporter.write_line(
        f"--budget-generations {document['coverage_generations']} covers every capability of "
        f"every target once (one cheapest test per capability, MUST first)"
    )
    reporter.write_line(
        f"estimates per test: {', '.join(BASIS)}; plan written to "
        f"{os.path.abspath(run.report_path / 'plan.json')}"
    )
