"""A read of `/v1/rl/workers` outlasts the RL listener's own probe deadline: a worker that never
answers its probe is then listed with its `error` before the client gives up on the read."""

from __future__ import annotations

import httpx

from rl_conformance.client.http import DEFAULT_DEADLINE_S, Client, discovery_deadline_s

LISTENER_DEFAULT_PROBE_DEADLINE_S = 30
"""`DYN_RL_REQUEST_TIMEOUT_SECS`'s default (ai-dynamo/dynamo lib/rl/src/lib.rs)."""


def test_the_default_discovery_deadline_is_longer_than_the_listeners() -> None:
    assert discovery_deadline_s(DEFAULT_DEADLINE_S) > LISTENER_DEFAULT_PROBE_DEADLINE_S


def test_a_longer_deadline_reaches_the_transport_too() -> None:
    """The wire is given the request's own deadline, longer than the client's default."""
    given: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        given.append(request.extensions["timeout"]["read"])
        return httpx.Response(200, stream=httpx.ByteStream(b"{}"))

    with Client(deadline_s=2.0, transport=httpx.MockTransport(handler)) as client:
        client.request("GET", "http://listener/v1/rl/workers", deadline_s=3.0)
        client.request("GET", "http://listener/v1/rl/workers")
    assert 2.5 < given[0] <= 3.0 and 1.5 < given[1] <= 2.0
