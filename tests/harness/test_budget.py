"""The generation budget: which requests count, the cap on what is sent, and which tests a
budget chooses (MUST before SHOULD, the cheapest first, per target)."""

from __future__ import annotations

import httpx
import pytest

from rl_conformance.budget import (
    BudgetExhausted,
    CountingClient,
    PlannedTest,
    choose,
    cost_key,
    estimate,
    is_generation,
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

    async def answer(request: httpx.Request) -> httpx.Response:
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


def planned(nodeid: str, level: str, estimated: int, target: str = "t") -> PlannedTest:
    return PlannedTest(nodeid, target, ("c",), level, estimated)


def test_a_budget_takes_must_before_should_and_the_cheapest_first() -> None:
    tests = [
        planned("should-cheap", "SHOULD", 1),
        planned("must-dear", "MUST", 8),
        planned("must-cheap", "MUST", 2),
        planned("must-mid", "MUST", 5),
        planned("other-target", "MUST", 9, target="u"),
    ]
    chosen = {test.nodeid: test.selected for test in choose(tests, 7)}
    assert chosen == {
        "should-cheap": False,  # the cheapest of all, but every MUST that fits comes first
        "must-dear": False,  # 2 + 5 + 8 > 7
        "must-cheap": True,
        "must-mid": True,
        "other-target": False,  # each target has its own budget: 9 > 7
    }
    chosen = {test.nodeid: test.selected for test in choose(tests, 9)}
    assert chosen["should-cheap"] and not chosen["must-dear"]  # what MUSTs leave, SHOULDs use
    assert [test.nodeid for test in choose(tests, 9)] == [test.nodeid for test in tests]
    assert all(test.selected for test in choose(tests, None))


def test_costs_are_keyed_without_the_target() -> None:
    assert cost_key("suites/test_x.py::test_y[fake-vllm-3]", "fake-vllm") == "test_x.py::test_y[3]"
    assert cost_key("test_x.py::test_y[fake-vllm-sidecar]", "fake-vllm-sidecar") == (
        "test_x.py::test_y"
    )
    assert estimate("test_x.py::test_unknown[t]", "t", 8) == 10  # unknown: 2 + 1 per example


def test_every_suite_test_has_a_measured_cost(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`rl-conformance generation-costs` must be re-run when a suite test is added."""
    import json

    from rl_conformance.budget import measured_costs
    from rl_conformance.config import RunConfig
    from rl_conformance.runner import run

    run(RunConfig(dry_run=True, report_dir=str(tmp_path)), verbosity="quiet")
    plan = json.loads((tmp_path / "plan.json").read_text())
    keys = {cost_key(test["nodeid"], test["target"]) for test in plan["tests"]}
    assert len(plan["tests"]) > 250
    assert keys - set(measured_costs()) == set()
