"""The per-plane circuit breaker: consecutive transport failures of one route open its origin."""

from __future__ import annotations

import pytest

from rl_conformance.client.breaker import CircuitBreaker, PlaneUnavailable
from rl_conformance.wire.exchange import Exchange, WireRequest


def exchange(url: str, error: str | None = None, method: str = "POST") -> Exchange:
    return Exchange(WireRequest(method, url, {}), status=None if error else 200, error=error)


FRONTEND = "http://10.0.0.1:8000"


def test_two_failures_of_one_route_open_the_whole_origin_with_the_first_evidence() -> None:
    breaker = CircuitBreaker()
    breaker.record(exchange(f"{FRONTEND}/v1/completions", "deadline 1"))
    breaker.check(f"{FRONTEND}/v1/models")
    breaker.record(exchange(f"{FRONTEND}/v1/completions", "deadline 2"))
    with pytest.raises(PlaneUnavailable, match=r"first: POST .*/v1/completions -> no response"):
        breaker.check(f"{FRONTEND}/v1/models")
    breaker.check("http://10.0.0.1:8001/v1/rl/workers")  # the RL plane goes on


def test_an_answer_of_the_same_route_resets_it_and_other_routes_do_not() -> None:
    breaker = CircuitBreaker()
    completions = f"{FRONTEND}/v1/completions"
    breaker.record(exchange(completions, "deadline"))
    breaker.record(exchange(f"{FRONTEND}/v1/models", method="GET"))  # listings still answer
    breaker.record(exchange(completions))  # an answer of the same route
    breaker.record(exchange(completions, "deadline"))
    assert breaker.opened() == {}
    breaker.record(exchange(completions, "deadline"))
    assert list(breaker.opened()) == [FRONTEND]


def test_expected_failures_do_not_count_and_a_trip_opens_at_once() -> None:
    breaker = CircuitBreaker()
    for _ in range(5):
        breaker.record(exchange(f"{FRONTEND}/v1/completions", "deadline"), counts=False)
    assert breaker.opened() == {}
    breaker.trip(f"{FRONTEND}/v1/models", "preflight: reset")
    assert breaker.opened() == {FRONTEND: f"{FRONTEND} is unavailable: preflight: reset"}
    breaker.clear()
    assert breaker.opened() == {}
