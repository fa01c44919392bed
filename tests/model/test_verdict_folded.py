"""`Verdict.folded` reaches the verdict `Verdict.events` reaches, from the fold the client made as
the stream arrived: the same checks with the same outcomes and messages, on a faithful stream, a
stream with an event that is not JSON, a refused one and one whose last event was cut."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from rl_conformance.checks.aggregate import aggregate_stream
from rl_conformance.checks.stream_fold import StreamFold
from rl_conformance.checks.terminal import ending_from_body, ending_from_fold
from rl_conformance.client.breaker import CircuitBreaker
from rl_conformance.client.http import Client
from rl_conformance.model.verdict import ConformanceFailure, Verdict
from rl_conformance.wire.exchange import Exchange

URL = "http://deployment.test/v1/completions"


def chunk(position: int, finish: str | None = None) -> bytes:
    payload = {
        "choices": [{"index": 0, "text": "x", "finish_reason": finish}],
        "nvext": {"completion_token_ids": [] if finish else [position]},
    }
    return f"data: {json.dumps(payload)}\n\n".encode()


FAITHFUL = b"".join(chunk(i) for i in range(6)) + chunk(6, "length") + b"data: [DONE]\n\n"
NOT_JSON = chunk(0) + b"data: {not json\n\n" + chunk(1, "stop") + b"data: [DONE]\n\n"
CUT = chunk(0) + chunk(1) + b"data: {never ended"


def exchange_of(status: int, body: bytes) -> Exchange:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            status, headers={"content-type": "text/event-stream"}, content=iter([body])
        )

    client = Client(transport=httpx.MockTransport(handle), breaker=CircuitBreaker(threshold=0))
    try:
        return client.stream("POST", URL, json_body={})
    finally:
        client.close()


def outcome(judge: Callable[[Verdict], object]) -> tuple[list[tuple[str, bool]], str | None]:
    """The checks a judge recorded (id, passed) and the failure it raised, if any."""
    verdict = Verdict()
    try:
        judge(verdict)
        failure = None
    except ConformanceFailure as exc:
        failure = str(exc)
    return [(result.check_id, result.passed) for result, _ in verdict.results], failure


@pytest.mark.parametrize(
    ("status", "body"),
    [(200, FAITHFUL), (200, NOT_JSON), (503, b'{"error": "busy"}'), (200, CUT)],
    ids=["faithful", "an-event-not-json", "refused", "cut-in-an-event"],
)
def test_folded_records_the_checks_and_failure_events_records(status: int, body: bytes) -> None:
    exchange = exchange_of(status, body)
    assert outcome(lambda verdict: verdict.folded(exchange)) == outcome(
        lambda verdict: verdict.events(exchange)
    )


def test_a_faithful_stream_is_folded_once_and_ends_as_its_events_say() -> None:
    exchange = exchange_of(200, FAITHFUL)
    fold = Verdict().folded(exchange)
    assert fold is exchange.fold  # the client's own fold: no event parsed again
    from_events = ending_from_body(aggregate_stream(Verdict().events(exchange)))
    assert ending_from_fold(fold).finish_reason == from_events.finish_reason == "length"
    assert fold.ids.tolist() == from_events.completion_ids == list(range(6))


def test_an_exchange_the_client_did_not_fold_is_folded_from_its_events() -> None:
    exchange = exchange_of(200, FAITHFUL)
    exchange.fold = None
    fold = Verdict().folded(exchange)
    assert isinstance(fold, StreamFold) and fold.ids.tolist() == list(range(6))
    assert fold.finish_reasons == {"0": "length"}
