"""One administrative step over many workers: sent to all of them (at most `FANOUT` at once),
answered in the workers' order, and refused before anything is sent when any worker may not be
mutated or does not advertise the route."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker, RouteNotAdvertised
from rl_conformance.model.mutations import MutationPolicy, MutationRefused

ROUTES = ("pause_generation", "resume_generation")


def fleet(size: int) -> list[AdminWorker]:
    return [AdminWorker(n, f"http://worker-{n}:9", ROUTES) for n in range(size)]


def recording_client(sent: list[str], in_flight: list[int]) -> Client:
    current = [0]
    counting = threading.Lock()

    def answer(request: httpx.Request) -> httpx.Response:
        with counting:
            current[0] += 1
            in_flight.append(current[0])
        time.sleep(0.01)
        with counting:
            current[0] -= 1
            sent.append(request.url.host)
        return httpx.Response(200, stream=httpx.ByteStream(b'{"status":"ok"}'))

    return Client(transport=httpx.MockTransport(answer))


def test_a_step_reaches_every_worker_at_once_and_answers_in_order() -> None:
    sent: list[str] = []
    in_flight: list[int] = []
    client = recording_client(sent, in_flight)
    try:
        workers = fleet(20)
        exchanges = AdminClient(client, MutationPolicy(allowed=True)).call_each(
            workers, "pause_generation", {}
        )
    finally:
        client.close()
    assert sorted(sent) == sorted(f"worker-{n}" for n in range(20))
    assert [e.request.url for e in exchanges] == [
        f"http://worker-{n}:9/engine/pause_generation" for n in range(20)
    ]
    assert max(in_flight) > 1  # not one at a time


@pytest.mark.parametrize(
    ("policy", "route", "refusal"),
    [
        (
            MutationPolicy(allowed=True, workers=frozenset({0, 1})),
            "pause_generation",
            MutationRefused,
        ),
        (MutationPolicy(allowed=True), "flush_cache", RouteNotAdvertised),
    ],
)
def test_nothing_is_sent_when_one_worker_may_not_take_the_step(
    policy: MutationPolicy, route: str, refusal: type[Exception]
) -> None:
    sent: list[str] = []
    client = recording_client(sent, [])
    try:
        with pytest.raises(refusal):
            AdminClient(client, policy).call_each(fleet(3), route, {})
    finally:
        client.close()
    assert sent == []
