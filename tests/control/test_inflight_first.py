"""A stream's first token is awaited together with its worker's own counters: whichever says the
stream is being generated first decides, so a first token held back by a slow link does not hold
the step back (the engine may be far into the stream by the time it arrives)."""

from __future__ import annotations

import threading

import httpx

from rl_conformance.client.http import Client
from rl_conformance.control.inflight import InFlightStream
from rl_conformance.model.target import Target


def stream() -> InFlightStream:
    client = Client(transport=httpx.MockTransport(lambda request: httpx.Response(500)))
    target = Target(id="t", backend="vllm", kind="external", frontend_url="http://frontend:1")
    return InFlightStream(client, target, [1, 2], instance_id=None, max_tokens=512)


def test_the_first_token_decides_when_it_comes_first() -> None:
    waiting = stream()
    threading.Timer(0.05, lambda: waiting.progress.advance(1, 1)).start()
    assert waiting.await_first(5.0, lambda: False) == "token"


def test_the_workers_counters_decide_when_they_move_first() -> None:
    reads = iter([False, False, True])
    assert stream().await_first(5.0, lambda: next(reads)) == "counters"


def test_an_event_naming_no_token_is_served_when_any_event_is_asked_for() -> None:
    served = stream()
    served.progress.advance(1, 0)
    assert served.await_first(0.1, any_event=True) == "token"
    assert served.await_first(0.1) is None


def test_nothing_within_the_time_or_a_stream_that_ended_says_nothing() -> None:
    ended = stream()
    ended.progress.end()
    assert ended.await_first(5.0, lambda: False) is None
    assert stream().await_first(0.05, lambda: False) is None
