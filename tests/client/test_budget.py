"""The generation budget: which requests count, the cap on what is sent, and which tests a
budget chooses (one test per capability first, MUST first and the cheapest; property tests with
fewer examples rather than none; per target)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from rl_conformance.client.budget import (
    FEWEST_EXAMPLES,
    START_GENERATIONS,
    BudgetExhausted,
    Cost,
    CountingClient,
    GenerationRefused,
    PlannedTest,
    choose,
    cost_key,
    coverage,
    estimate,
    is_generation,
    plan_test,
)


def test_generation_requests_are_the_posts_that_generate() -> None:
    assert is_generation("POST", "http://h:1/v1/completions")
    assert is_generation("post", "http://h:1/v1/chat/completions/")
    assert is_generation("POST", "http://h:1/inference/v1/generate")
    assert is_generation("POST", "http://h:1/v1/responses")
    assert not is_generation("POST", "http://h:1/v1/responses/input_tokens")
    assert not is_generation("GET", "http://h:1/v1/completions")
    assert not is_generation("POST", "http://h:1/engine/pause_generation")


def test_the_client_sends_no_generation_beyond_the_budget() -> None:
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(f"{request.method} {request.url.path}")
        return httpx.Response(200, stream=httpx.ByteStream(b"{}"))

    client = CountingClient(budget=2, transport=httpx.MockTransport(answer))
    try:
        client.target_id = "a"
        client.post("http://h:1/v1/completions", {})
        client.get("http://h:1/v1/models")
        client.post("http://h:1/v1/chat/completions", {})
        with pytest.raises(BudgetExhausted, match="--budget-generations 2"):
            client.post("http://h:1/v1/completions", {})
        client.get("http://h:1/metrics")  # not a generation: still sent
        client.target_id = "b"  # the budget is per target
        client.post("http://h:1/v1/completions", {})
    finally:
        client.close()
    assert client.spent("a") == 2 and client.spent("b") == 1
    assert sent.count("POST /v1/completions") == 2


def test_a_mutating_test_of_a_read_only_run_sends_no_generation() -> None:
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(f"{request.method} {request.url.path}")
        return httpx.Response(200, stream=httpx.ByteStream(b"{}"))

    client = CountingClient(budget=5, transport=httpx.MockTransport(answer))
    try:
        client.target_id = "a"
        client.refusal = "read-only run: a mutating test is stopped (use --allow-mutations)"
        client.get("http://h:1/v1/rl/workers")  # reads are what it may do
        with pytest.raises(GenerationRefused, match=r"read-only run.*POST /v1/completions"):
            client.post("http://h:1/v1/completions", {})
        client.refusal = None
        client.post("http://h:1/v1/completions", {})
    finally:
        client.close()
    assert sent == ["GET /v1/rl/workers", "POST /v1/completions"]
    assert client.spent("a") == 1


def planned(
    nodeid: str,
    level: str,
    estimated: int,
    target: str = "t",
    capabilities: tuple[str, ...] = ("c",),
) -> PlannedTest:
    return PlannedTest(nodeid, target, capabilities, level, estimated)


def selected(tests: list[PlannedTest], budget: int | None) -> set[str]:
    return {test.nodeid for test in choose(tests, budget) if test.selected}


START = START_GENERATIONS  # what each target's start sends, reserved first


def test_a_budget_covers_each_capability_once_before_a_second_test_of_any() -> None:
    tests = [
        planned("a-1", "MUST", 1, capabilities=("a",)),
        planned("a-2", "MUST", 1, capabilities=("a",)),
        planned("a-3", "MUST", 1, capabilities=("a",)),
        planned("b", "MUST", 3, capabilities=("b",)),
        planned("s", "SHOULD", 1, capabilities=("s",)),
        planned("free", "MUST", 0, capabilities=("f",)),
        planned("other-target", "MUST", 9, target="u", capabilities=("a",)),
    ]
    # the cheapest-first rule of old spent 3 on a's variants and left b, a MUST row, uncovered
    assert selected(tests, START + 4) == {"free", "a-1", "b"}
    # a SHOULD row's first test before a MUST row's second one
    assert selected(tests, START + 5) == {"free", "a-1", "b", "s"}
    assert selected(tests, START + 7) == {"free", "a-1", "b", "s", "a-2", "a-3"}
    # MUST first; a MUST row that does not fit leaves what is left to cheaper rows, then tests
    assert selected(tests, START + 3) == {"free", "a-1", "s", "a-2"}
    assert selected(tests, START) == {"free"}  # each target has its own budget: 9 > 4
    assert [test.nodeid for test in choose(tests, 5)] == [test.nodeid for test in tests]
    assert all(test.selected for test in choose(tests, None))
    priced = coverage(tests, examples=8)
    assert priced["t"]["generations"] == START + 1 + 3 + 1 and priced["t"]["capabilities"] == 4
    assert priced["u"]["generations"] == START + 9


def test_the_first_tests_are_the_cheapest_evidence_of_their_row() -> None:
    tests = [
        planned("x-dear", "MUST", 5, capabilities=("x",)),
        planned("x-and-y", "MUST", 2, capabilities=("x", "y")),
        planned("y-cheap", "SHOULD", 1, capabilities=("y",)),
    ]
    chosen = {test.nodeid: test for test in choose(tests, START + 2)}
    assert chosen["x-and-y"].selected and chosen["x-and-y"].covers_first == ("x", "y")
    assert not chosen["x-dear"].selected and not chosen["y-cheap"].selected


def property_test(nodeid: str, capability: str, examples: int = 8) -> PlannedTest:
    cost = Cost(fixed=1, per_example=1.0)
    return PlannedTest(
        nodeid, "t", (capability,), "MUST", cost.estimate(examples), cost=cost, examples=examples
    )


def test_a_property_test_runs_with_fewer_examples_rather_than_not_at_all() -> None:
    tests = [property_test("p", "p"), planned("q", "MUST", 2, capabilities=("q",))]
    assert FEWEST_EXAMPLES == 2  # the fewest the estimates were measured at
    by_budget = {
        budget: {test.nodeid: test for test in choose(tests, budget)}
        for budget in (START + 2, START + 5, START + 7, START + 11, START + 20)
    }
    assert not by_budget[START + 2]["p"].selected  # 1 + 2 examples do not fit beside q
    assert by_budget[START + 5]["p"].examples == 2 and by_budget[START + 5]["p"].estimated == 3
    assert by_budget[START + 7]["p"].examples == 4  # the coverage tests get their examples back
    assert by_budget[START + 11]["p"].examples == 8 and by_budget[START + 11]["p"].estimated == 9
    assert by_budget[START + 20]["p"].examples == 8
    assert all(by_budget[START + 5][name].selected for name in "pq")
    priced = coverage(tests, examples=8)["t"]
    assert (priced["generations"], priced["generations_fewest_examples"]) == (12, 6)
    # a budget of either figure covers every capability, the first with every example
    for budget in (priced["generations"], priced["generations_fewest_examples"]):
        assert {t.nodeid for t in choose(tests, budget) if t.selected} == {"p", "q"}
    assert {t.examples for t in choose(tests, priced["generations"]) if t.nodeid == "p"} == {8}


def test_a_mutating_test_of_a_read_only_run_is_charged_nothing() -> None:
    nodeid = "suites/test_refresh_stale_cache.py::test_flush_invalidates_cached_prefixes[t]"
    mutating = plan_test(nodeid, "t", ("refresh.kv_invalidation",), "MUST", 8, read_only=True)
    allowed = plan_test(nodeid, "t", ("refresh.kv_invalidation",), "MUST", 8)
    assert allowed.estimated > 0
    assert mutating.estimated == 0 and mutating.read_only and mutating.charge(8) == 0
    (chosen,) = choose([mutating], START)
    assert chosen.selected and chosen.to_json()["read_only"] is True


def test_costs_are_keyed_without_the_target() -> None:
    assert cost_key("suites/test_x.py::test_y[fake-vllm-3]", "fake-vllm") == "test_x.py::test_y[3]"
    assert cost_key("test_x.py::test_y[fake-vllm-sidecar]", "fake-vllm-sidecar") == (
        "test_x.py::test_y"
    )
    assert estimate("test_x.py::test_unknown[t]", "t", 8) == 10  # unknown: 2 + 1 per example


def test_every_suite_test_has_a_measured_cost(tmp_path: Path) -> None:
    """`rl-conformance generation-costs` must be re-run when a suite test is added."""
    import json

    from rl_conformance.client.budget import measured_costs
    from rl_conformance.launchers.run_plan import plan_run
    from rl_conformance.model.config import RunConfig
    from rl_conformance.plugin.runner import run

    run(plan_run(RunConfig(dry_run=True, report_dir=str(tmp_path))), verbosity="quiet")
    plan = json.loads((tmp_path / "plan.json").read_text())
    keys = {cost_key(test["nodeid"], test["target"]) for test in plan["tests"]}
    assert len(plan["tests"]) > 250
    assert keys - set(measured_costs()) == set()
