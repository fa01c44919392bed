"""Generation requests, the resource a live fleet pays for: counted for every test, capped per
target by `--budget-generations N`, and estimated per test so that a budget chooses what runs
(MUST before SHOULD, then the cheapest evidence first) and `--dry-run` can say what a run costs.

Estimates come from `generation_costs.json`, measured on our fakes (`rl-conformance
generation-costs`): a test's generations as `fixed + per_example x --examples`, the largest over
the fakes. A deployment that answers differently (retries, a feature absent) may need more or
fewer; the cap is enforced on the requests actually sent, whatever the estimate said.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from .client import Client
from .matrix import UNCOVERED_PREFIX
from .verdict import Inconclusive

GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions", "/v1/responses", "/generate")
LEVEL_ORDER = {"MUST": 0, "SHOULD": 1, "MAY": 2}
COSTS_RESOURCE = "generation_costs.json"
UNKNOWN_FIXED = 2
BASIS = ("measured on the fakes (the largest)", "fixed + per example x --examples")
"""A test the table does not know: assume a couple of requests plus one per example."""


def is_generation(method: str, url: str) -> bool:
    """A request that makes the deployment generate tokens (what a live fleet pays for)."""
    path = urlsplit(url).path.rstrip("/")
    return method.upper() == "POST" and path.endswith(GENERATION_PATHS)


class BudgetExhausted(Inconclusive):
    """The target's generation budget is spent: the test is `skipped`, naming the flag."""


class CountingClient(Client):
    """The run's client: counts generation requests per target (the one whose test is running)
    and refuses any beyond the budget."""

    def __init__(self, *, budget: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.budget = budget
        self.target_id = ""
        self.generations: dict[str, int] = {}

    def _spend(self, method: str, url: str) -> None:
        if not is_generation(method, url):
            return
        spent = self.generations.get(self.target_id, 0)
        if self.budget is not None and spent >= self.budget:
            raise BudgetExhausted(
                f"--budget-generations {self.budget}: {self.target_id or 'the target'} has had "
                f"its {self.budget} generation requests; {method} {urlsplit(url).path} not sent"
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
    selected: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "target": self.target_id,
            "capabilities": list(self.capabilities),
            "level": self.level,
            "estimated_generations": self.estimated,
            "selected": self.selected,
        }


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


def estimate(nodeid: str, target_id: str, examples: int) -> int:
    key = cost_key(nodeid, target_id)
    costs = measured_costs()
    cost = costs.get(key) or costs.get(re.sub(r"\[.*\]$", "", key))
    if cost is None:
        cost = Cost(UNKNOWN_FIXED, 1.0)
    return cost.estimate(examples)


def choose(tests: Sequence[PlannedTest], budget: int | None) -> list[PlannedTest]:
    """Per target, the tests a budget covers: MUST before SHOULD before MAY, the cheapest first
    within a level, each taken while the target's estimated total stays within the budget.
    Returned in the given order, each marked selected or not."""
    if budget is None:
        return list(tests)
    chosen: set[int] = set()
    spent: dict[str, int] = {}
    ranked = sorted(
        range(len(tests)),
        key=lambda i: (LEVEL_ORDER.get(tests[i].level, 3), tests[i].estimated, i),
    )
    for index in ranked:
        test = tests[index]
        total = spent.get(test.target_id, 0) + test.estimated
        if total <= budget:
            spent[test.target_id] = total
            chosen.add(index)
    return [
        test if index in chosen else replace(test, selected=False)
        for index, test in enumerate(tests)
    ]


def uncovered_reason(test: PlannedTest, budget: int) -> str:
    return (
        f"{UNCOVERED_PREFIX} {budget}: this test needs about {test.estimated} "
        f"generation request(s); tests of higher priority or cheaper evidence took the budget"
    )


def plan_document(
    tests: Iterable[PlannedTest], budget: int | None, examples: int
) -> dict[str, Any]:
    """What a run would do (`--dry-run`, written as plan.json)."""
    listed = list(tests)
    targets: dict[str, dict[str, Any]] = {}
    for test in listed:
        entry = targets.setdefault(
            test.target_id,
            {"tests": 0, "selected": 0, "estimated_generations": 0, "selected_generations": 0},
        )
        entry["tests"] += 1
        entry["estimated_generations"] += test.estimated
        if test.selected:
            entry["selected"] += 1
            entry["selected_generations"] += test.estimated
    return {
        "budget_generations": budget,
        "examples": examples,
        "targets": targets,
        "tests": [test.to_json() for test in listed],
    }
