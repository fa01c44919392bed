"""A stream longer than the client keeps whole: the exchange keeps its first and last events, says
how many it elided (in the exchange, its wire log and its reproducer), still folds every event
into the verdicts' inputs, and the caps still count every event and byte."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import httpx
import pytest

from rl_conformance.checks import logprobs, streaming, tokens
from rl_conformance.client.breaker import CircuitBreaker
from rl_conformance.client.http import Client
from rl_conformance.client.reproducers import replayable
from rl_conformance.wire.exchange import EventsElided
from rl_conformance.wire.stream_state import StreamState

URL = "http://deployment.test/v1/completions"
MakeClient = Callable[..., Client]


def chunk(position: int, finish: str | None = None) -> bytes:
    ids = [] if finish else [position]
    values = [] if finish else [-0.25]
    payload = {
        "choices": [
            {
                "index": 0,
                "text": "x",
                "logprobs": {"tokens": ["x"] * len(ids), "token_logprobs": values},
                "finish_reason": finish,
            }
        ],
        "nvext": {"completion_token_ids": ids},
    }
    return f"data: {json.dumps(payload)}\n\n".encode()


def transport(tokens: int) -> httpx.MockTransport:
    def body() -> Iterator[bytes]:
        for position in range(tokens):
            yield chunk(position)
        yield chunk(tokens, finish="length") + b"data: [DONE]\n\n"

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    return httpx.MockTransport(handle)


@pytest.fixture
def client_for() -> Iterator[MakeClient]:
    made: list[Client] = []

    def make(tokens: int, **limits: int) -> Client:
        made.append(
            Client(transport=transport(tokens), breaker=CircuitBreaker(threshold=0), **limits)
        )
        return made[-1]

    yield make
    for client in made:
        client.close()


def test_a_long_stream_keeps_its_first_and_last_events_and_counts_the_rest(
    client_for: MakeClient,
) -> None:
    exchange = client_for(1000, keep_events=20).stream("POST", URL, json_body={})
    assert exchange.state is StreamState.SUCCESS
    assert exchange.event_count == 1002  # 1000 tokens, the terminal chunk, [DONE]
    assert len(exchange.events) == 20 and exchange.events_elided == 982
    numbered = exchange.numbered_events()
    assert [n for n, _ in numbered] == [*range(10), *range(992, 1002)]
    assert numbered[-1][1].data == "[DONE]"
    assert exchange.stream_bytes > len(exchange.body)
    with pytest.raises(EventsElided, match="982 elided"):
        exchange.payloads()


def test_a_long_stream_is_judged_from_its_fold(client_for: MakeClient) -> None:
    fold = client_for(1000, keep_events=20).stream("POST", URL, json_body={}).fold
    assert fold.payloads == 1002
    assert tokens.stream_concat(fold, list(range(1000))).passed
    assert not tokens.stream_concat(fold, list(range(1, 1001))).passed
    assert logprobs.selected_alignment(fold, list(range(1000))).passed
    assert streaming.single_terminal(fold).passed and streaming.done_last(fold).passed


def test_the_wire_log_says_how_many_events_it_elided_and_is_not_replayed(
    client_for: MakeClient,
) -> None:
    log = client_for(1000, keep_events=20).stream("POST", URL, json_body={}).wire_log()
    assert log["event_count"] == 1002 and log["events_elided"] == 982
    assert [e["data"] for e in log["events"]][10] == "... [982 events elided]"
    assert log["events"][-1]["data"] == "[DONE]" and len(log["events"]) == 21
    assert replayable(log) == "not replayed: the recorded stream was cut (982 events elided)"


def test_a_wire_log_over_its_byte_budget_keeps_the_start_and_the_end(
    client_for: MakeClient,
) -> None:
    exchange = client_for(1000).stream("POST", URL, json_body={})
    assert exchange.events_elided == 0 and len(exchange.payloads()) == 1002
    log = exchange.wire_log(limit=4000)
    shown = [e for e in log["events"] if "elided" not in e]
    assert 0 < len(shown) < 1002 and log["events"][-1]["data"] == "[DONE]"
    assert log["events_elided"] == 1002 - len(shown)


def test_a_short_stream_is_kept_whole(client_for: MakeClient) -> None:
    exchange = client_for(5, keep_events=20).stream("POST", URL, json_body={})
    assert exchange.event_count == len(exchange.events) == 7
    assert len(exchange.payloads()) == 7
    assert "events_elided" not in exchange.wire_log()


def test_the_event_cap_counts_every_event_not_only_the_kept_ones(client_for: MakeClient) -> None:
    exchange = client_for(1000, keep_events=10, max_stream_events=100).stream(
        "POST", URL, json_body={}
    )
    assert exchange.state is StreamState.FAILED
    assert exchange.event_count == 100 and len(exchange.events) == 10
    assert "exceeded the 100-event limit" in (exchange.error or "")


def test_the_byte_cap_counts_every_byte(client_for: MakeClient) -> None:
    exchange = client_for(1000, max_stream_bytes=10_000).stream("POST", URL, json_body={})
    assert exchange.state is StreamState.FAILED
    assert exchange.body_truncated and exchange.stream_bytes <= 10_000
    assert "exceeded the 10000-byte limit" in (exchange.error or "")


def test_a_stream_the_client_closed_on_purpose_is_not_replayed() -> None:
    """A replay would read the whole stream the test stopped reading: never the same events."""
    log = {"status": 200, "state": "canceled", "events": [{"data": "{}"}], "request": {}}
    assert replayable(log) == (
        "not replayed: the client closed the stream early on purpose (a replay reads it all)"
    )
