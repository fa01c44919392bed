"""Generation requests, the resource a live fleet pays for: counted for every test, capped per
target by `--budget-generations N`, and estimated per test so that a budget chooses what runs
and `--dry-run` can say what a run costs.

A budget covers capabilities before it deepens any (`choose`): first one test per capability, the
cheapest (a property test at its fewest examples), MUST capabilities first; then those tests get
the run's `--examples` back; only then second tests, MUST before SHOULD and the cheapest first (a
property test that does not fit whole runs with fewer examples). A mutating test of a read-only
run is charged nothing: it is stopped before its first generation request
(`CountingClient.refusal`). Each target's budget first reserves what its start sends
(`START_GENERATIONS`).

Estimates come from `generation_costs.json`, measured on our fakes (`rl-conformance
generation-costs`): a test's generations as `fixed + per_example x --examples`, the largest over
the fakes. A deployment that answers differently (retries, a feature absent) may need more or
fewer; the cap is enforced on the requests actually sent, whatever the estimate said.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from ..model import capabilities as capability_registry
from ..model.matrix import UNCOVERED_PREFIX
from ..model.verdict import Inconclusive
from .http import Client

GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions", "/v1/responses", "/generate")
LEVEL_ORDER = {"MUST": 0, "SHOULD": 1, "MAY": 2}
COSTS_RESOURCE = "generation_costs.json"
UNKNOWN_FIXED = 2
"""A test the table does not know: assume a couple of requests plus one per example."""
FEWEST_EXAMPLES = 2
"""The fewest examples a property test runs with when the budget cannot afford the run's: the
fewest the estimates were measured at (an estimate below it would be a guess: a state machine
runs at least two examples whatever the run's count)."""
START_GENERATIONS = 1
"""Sent when a target starts, before its first test (`plan.preflight_generation`: one token);
the budget reserves it. The measured estimates charge it to each target's first test as well."""
BASIS = ("measured on the fakes (the largest)", "fixed + per example x --examples")


def is_generation(method: str, url: str) -> bool:
    """A request that makes the deployment generate tokens (what a live fleet pays for)."""
    path = urlsplit(url).path.rstrip("/")
    return method.upper() == "POST" and path.endswith(GENERATION_PATHS)


class BudgetExhausted(Inconclusive):
    """The target's generation budget is spent: the test is `skipped`, naming the flag."""


class GenerationRefused(Inconclusive):
    """A mutating test of a read-only run reached its first generation request: it could not
    judge anything without mutating, so it is `skipped` before the fleet generates for it."""


class CountingClient(Client):
    """The run's client: counts generation requests per target (the one whose test is running)
    and refuses any beyond the budget, and any at all while `refusal` says why not."""

    def __init__(self, *, budget: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.budget = budget
        self.target_id = ""
        self.refusal: str | None = None
        """Set while a mutating test of a read-only run runs: why its generations are not sent."""
        self.generations: dict[str, int] = {}
        self._counting = threading.Lock()
        """A test sends the pinned generations of one step from several threads at once."""

    def _spend(self, method: str, url: str) -> None:
        if not is_generation(method, url):
            return
        if self.refusal is not None:
            raise GenerationRefused(f"{self.refusal}; {method} {urlsplit(url).path} not sent")
        with self._counting:
            spent = self.generations.get(self.target_id, 0)
            if self.budget is not None and spent >= self.budget:
                raise BudgetExhausted(
                    f"--budget-generations {self.budget}: {self.target_id or 'the target'} has "
                    f"had its {self.budget} generation requests; {method} {urlsplit(url).path} "
                    "not sent"
                )
            self.generations[self.target_id] = spent + 1

    def spent(self, target_id: str) -> int:
        return self.generations.get(target_id, 0)

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        self._spend(method, url)
        return super().request(method, url, **kwargs)

    def stream(self, method: str, url: str, **kwargs: Any) -> Any:
        self._spend(method, url)
        return super().stream(method, url, **kwargs)


@dataclass(frozen=True)
class Cost:
    fixed: float
    per_example: float

    def estimate(self, examples: int) -> int:
        return max(0, round(self.fixed + self.per_example * examples))


@dataclass(frozen=True)
class PlannedTest:
    nodeid: str
    target_id: str
    capabilities: tuple[str, ...]
    level: str
    estimated: int
    """Generation requests the plan charges the test (at `examples` for a property test)."""
    selected: bool = True
    cost: Cost | None = field(default=None, compare=False)
    """The measured estimate; None: `estimated` is all the plan knows."""
    examples: int | None = None
    """A property test (its estimate grows with examples): the examples the plan gives it."""
    read_only: bool = False
    """A mutating test of a read-only run: stopped before its first generation, charged 0."""
    covers_first: tuple[str, ...] = ()
    """The capabilities this test is the plan's one test of (the coverage phase)."""

    def charge(self, examples: int | None = None) -> int:
        """Generation requests at `examples` (a property test; others ignore it)."""
        if self.read_only:
            return 0
        if self.cost is None or self.examples is None or examples is None:
            return self.estimated
        return self.cost.estimate(examples)

    @property
    def fewest(self) -> int | None:
        """The fewest examples the plan may give a property test (None for any other test)."""
        return None if self.examples is None else min(FEWEST_EXAMPLES, self.examples)

    def least(self) -> int:
        """The least this test can be charged: a property test at its fewest examples."""
        return self.charge(self.fewest)

    def with_examples(self, examples: int | None) -> PlannedTest:
        if self.examples is None or examples is None:
            return replace(self, selected=True)
        return replace(self, selected=True, examples=examples, estimated=self.charge(examples))

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "nodeid": self.nodeid,
            "target": self.target_id,
            "capabilities": list(self.capabilities),
            "level": self.level,
            "estimated_generations": self.estimated,
            "selected": self.selected,
        }
        if self.examples is not None:
            document["examples"] = self.examples
        if self.read_only:
            document["read_only"] = True
        if self.covers_first:
            document["covers_first"] = list(self.covers_first)
        return document


def cost_key(nodeid: str, target_id: str) -> str:
    """A test's id without its target (`test_x.py::test_y[fake-vllm-3]` becomes
    `test_x.py::test_y[3]`)."""
    name = nodeid.rsplit("/", 1)[-1]
    if not target_id or "[" not in name:
        return name
    head, _, parameters = name.partition("[")
    parameters = parameters.removesuffix("]")
    rest = parameters.removeprefix(target_id).removeprefix("-")
    return f"{head}[{rest}]" if rest else head


@cache
def measured_costs() -> dict[str, Cost]:
    document = json.loads(
        resources.files("rl_conformance").joinpath(COSTS_RESOURCE).read_text(encoding="utf-8")
    )
    return {key: Cost(**value) for key, value in document["tests"].items()}


def cost_of(nodeid: str, target_id: str) -> Cost:
    key = cost_key(nodeid, target_id)
    costs = measured_costs()
    return costs.get(key) or costs.get(re.sub(r"\[.*\]$", "", key)) or Cost(UNKNOWN_FIXED, 1.0)


def estimate(nodeid: str, target_id: str, examples: int) -> int:
    return cost_of(nodeid, target_id).estimate(examples)


def plan_test(
    nodeid: str,
    target_id: str,
    capabilities: tuple[str, ...],
    level: str,
    examples: int,
    read_only: bool = False,
) -> PlannedTest:
    """A test as the plan sees it, at the run's `--examples`: a property test when its measured
    estimate grows with examples; a mutating test of a read-only run is charged nothing."""
    cost = cost_of(nodeid, target_id)
    return PlannedTest(
        nodeid=nodeid,
        target_id=target_id,
        capabilities=capabilities,
        level=level,
        estimated=0 if read_only else cost.estimate(examples),
        cost=cost,
        examples=examples if cost.per_example > 0 and not read_only else None,
        read_only=read_only,
    )


def _level_rank(level: str) -> int:
    return LEVEL_ORDER.get(level, len(LEVEL_ORDER))


def _capability_rank(capability_id: str, tests: Sequence[PlannedTest]) -> int:
    found = capability_registry.BY_ID.get(capability_id)
    if found is not None:
        return _level_rank(found.level.value)
    # unknown to the registry: a test takes the most demanding level of its capabilities, so
    # the least demanding level among the tests of this one is the closest to its own
    return max((_level_rank(test.level) for test in tests), default=len(LEVEL_ORDER))


class _TargetPlan:
    """One target's choice under a budget (None: unlimited, to price the coverage phase).
    `examples`: the run's, when the tests given may already carry fewer."""

    def __init__(
        self, tests: list[PlannedTest], budget: int | None, examples: int | None = None
    ) -> None:
        self.tests = tests
        self.budget = budget
        self.examples = examples
        self.spent = START_GENERATIONS
        self.taken: dict[int, PlannedTest] = {}
        self.first: dict[int, list[str]] = {}

    def full(self, index: int) -> int:
        """The test's estimate at the run's examples."""
        test = self.tests[index]
        return test.charge(self.examples if self.examples is not None else test.examples)

    def whole(self, index: int) -> int | None:
        """The run's examples for a property test (None for any other test)."""
        test = self.tests[index]
        if test.examples is None:
            return None
        return self.examples if self.examples is not None else test.examples

    def left(self) -> float:
        return float("inf") if self.budget is None else self.budget - self.spent

    def already(self, index: int) -> int:
        return self.taken[index].estimated if index in self.taken else 0

    def take(self, index: int, examples: int | None) -> None:
        chosen = self.tests[index].with_examples(examples)
        self.spent += chosen.estimated - self.already(index)
        self.taken[index] = chosen

    def most_examples(self, index: int, floor: int) -> int | None:
        """The most examples of a property test, from the run's down to `floor`, that fit in
        what is left (beyond what it is already charged); None if not even `floor` fits."""
        test, most = self.tests[index], self.whole(index) or floor
        for examples in range(most, floor - 1, -1):
            if test.charge(examples) - self.already(index) <= self.left():
                return examples
        return None

    def cover(self) -> list[int]:
        """One test per capability, MUST capabilities first, each the cheapest at its fewest
        examples; a capability is left uncovered only when no test of it fits. Free tests (no
        generation at all) are always taken. Returns the tests picked, in the order taken."""
        for index in range(len(self.tests)):
            if self.full(index) == 0:
                self.take(index, self.whole(index))
        carriers: dict[str, list[int]] = {}
        for index, test in enumerate(self.tests):
            for capability_id in test.capabilities:
                carriers.setdefault(capability_id, []).append(index)
        order = sorted(
            carriers,
            key=lambda c: (
                _capability_rank(c, [self.tests[i] for i in carriers[c]]),
                min(self.tests[i].least() for i in carriers[c]),
                carriers[c][0],
            ),
        )
        picked: list[int] = []
        for capability_id in order:
            if any(index in self.taken for index in carriers[capability_id]):
                continue
            fitting = [i for i in carriers[capability_id] if self.tests[i].least() <= self.left()]
            if not fitting:
                continue
            index = min(fitting, key=lambda i: (self.tests[i].least(), self.full(i), i))
            self.take(index, self.tests[index].fewest)
            picked.append(index)
        for capability_id in order:
            covering = [i for i in carriers[capability_id] if i in self.taken]
            if covering:
                first = min(covering, key=lambda i: (self.taken[i].estimated, i))
                self.first.setdefault(first, []).append(capability_id)
        return picked

    def deepen(self, picked: list[int]) -> None:
        """The coverage tests get the run's examples back (in the order they were taken), then
        further tests: MUST before SHOULD, the cheapest first, a property test with fewer
        examples when that lets it fit."""
        for index in picked:
            current = self.taken[index].examples
            if current is None:
                continue
            more = self.most_examples(index, current)
            if more is not None and more > current:
                self.take(index, more)
        ranked = sorted(
            (i for i in range(len(self.tests)) if i not in self.taken),
            key=lambda i: (_level_rank(self.tests[i].level), self.full(i), i),
        )
        for index in ranked:
            if self.whole(index) is None:
                if self.full(index) <= self.left():
                    self.take(index, None)
                continue
            examples = self.most_examples(index, self.tests[index].fewest or 1)
            if examples is not None:
                self.take(index, examples)

    def result(self) -> list[PlannedTest]:
        return [
            replace(self.taken[i], covers_first=tuple(self.first.get(i, ())))
            if i in self.taken
            else replace(test, selected=False)
            for i, test in enumerate(self.tests)
        ]


def _by_target(tests: Sequence[PlannedTest]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for index, test in enumerate(tests):
        groups.setdefault(test.target_id, []).append(index)
    return groups


def choose(tests: Sequence[PlannedTest], budget: int | None) -> list[PlannedTest]:
    """Per target, the tests a budget covers (see the module's docstring), each taken while the
    target's estimated total stays within the budget. Returned in the given order, each marked
    selected or not (a property test with the examples it was given)."""
    if budget is None:
        return list(tests)
    chosen = list(tests)
    for indices in _by_target(tests).values():
        plan = _TargetPlan([tests[i] for i in indices], budget)
        plan.deepen(plan.cover())
        for index, test in zip(indices, plan.result(), strict=True):
            chosen[index] = test
    return chosen


def coverage(tests: Sequence[PlannedTest], examples: int) -> dict[str, dict[str, int]]:
    """Per target, what covering every capability once costs: the coverage phase's tests at the
    run's `examples` (`generations`: with this budget each of them runs whole) and at their
    fewest (`generations_fewest_examples`: the least budget that covers every capability)."""
    found: dict[str, dict[str, int]] = {}
    for target_id, indices in _by_target(tests).items():
        plan = _TargetPlan([tests[i] for i in indices], None, examples)
        picked = plan.cover()
        found[target_id] = {
            "capabilities": len({c for i in indices for c in tests[i].capabilities}),
            "tests": len(plan.first),
            "generations": START_GENERATIONS + sum(plan.full(i) for i in picked),
            "generations_fewest_examples": START_GENERATIONS
            + sum(plan.tests[i].least() for i in picked),
        }
    return found


def uncovered_reason(test: PlannedTest, budget: int) -> str:
    return (
        f"{UNCOVERED_PREFIX} {budget}: this test needs about {test.least()} "
        f"generation request(s); the budget went first to one test per capability (MUST first), "
        f"then to tests of higher priority or cheaper evidence"
    )


def plan_document(
    tests: Iterable[PlannedTest], budget: int | None, examples: int
) -> dict[str, Any]:
    """What a run would do (`--dry-run`, written as plan.json): per test, its estimate and
    whether it runs; per target, the totals, what covering every capability once costs
    (`coverage`) and, with a budget, the capabilities it leaves uncovered."""
    listed = list(tests)
    priced = coverage(listed, examples)
    targets: dict[str, dict[str, Any]] = {}
    for test in listed:
        entry = targets.setdefault(
            test.target_id,
            {
                "tests": 0,
                "selected": 0,
                "start_generations": START_GENERATIONS,
                "estimated_generations": 0,
                "selected_generations": 0,
                "coverage": priced[test.target_id],
                "uncovered_capabilities": set(),
                "covered": set(),
            },
        )
        entry["tests"] += 1
        entry["estimated_generations"] += test.charge(examples)
        entry["uncovered_capabilities"].update(test.capabilities)
        if test.selected:
            entry["selected"] += 1
            entry["selected_generations"] += test.estimated
            entry["covered"].update(test.capabilities)
    for entry in targets.values():
        entry["uncovered_capabilities"] = sorted(
            entry["uncovered_capabilities"] - entry.pop("covered")
        )
    return {
        "budget_generations": budget,
        "examples": examples,
        "coverage_generations": max((found["generations"] for found in priced.values()), default=0),
        "targets": targets,
        "tests": [test.to_json() for test in listed],
    }
