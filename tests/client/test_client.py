"""The client never hangs past its deadline, never crashes, keeps memory bounded, and always
returns an exchange that says what went wrong."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from fake_backends.deployment.hostile import hostile_server
from rl_conformance.client.breaker import CircuitBreaker, PlaneUnavailable
from rl_conformance.client.http import Client
from rl_conformance.wire.stream_state import StreamState

DEADLINE = 1.0


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with hostile_server() as url:
        yield url


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    # Every hostile path shares one origin: the breaker would open after three of them.
    never = CircuitBreaker(threshold=0)
    with Client(deadline_s=DEADLINE, max_body_bytes=1024 * 1024, breaker=never) as made:
        yield made


@pytest.fixture(scope="module")
def patient() -> Iterator[Client]:
    """For the hostile answers that end by themselves: a deadline no loaded machine reaches, so
    what the test reads is the answer's defect, never the deadline."""
    never = CircuitBreaker(threshold=0)
    with Client(deadline_s=30.0, max_body_bytes=1024 * 1024, breaker=never) as made:
        yield made


@pytest.mark.parametrize("path", ["/stall", "/headers-then-stall", "/drip", "/endless"])
def test_stalling_dripping_and_endless_streams_end_at_the_deadline(
    client: Client, base: str, path: str
) -> None:
    started = time.monotonic()
    exchange = client.stream("POST", base + path, json_body={})
    assert time.monotonic() - started < DEADLINE + 2
    assert exchange.state is StreamState.FAILED
    assert exchange.state_reason


def test_stalled_unary_request_ends_at_the_deadline(client: Client, base: str) -> None:
    started = time.monotonic()
    exchange = client.get(base + "/stall")
    assert time.monotonic() - started < DEADLINE + 2
    assert exchange.status is None
    assert "deadline" in (exchange.error or "")


def test_truncated_event_fails_the_stream(patient: Client, base: str) -> None:
    exchange = patient.stream("POST", base + "/truncated-sse", json_body={})
    assert exchange.state is StreamState.FAILED
    assert "middle of an event" in exchange.state_reason


def test_invalid_utf8_fails_the_stream(patient: Client, base: str) -> None:
    exchange = patient.stream("POST", base + "/invalid-utf8-sse", json_body={})
    assert exchange.state is StreamState.FAILED
    assert "UTF-8" in exchange.state_reason


def test_invalid_json_body_is_reported_with_a_preview(patient: Client, base: str) -> None:
    exchange = patient.get(base + "/invalid-json")
    assert exchange.status == 200
    with pytest.raises(ValueError, match=r"expected JSON, observed '\{not json'"):
        exchange.json()


def test_a_declared_oversized_body_is_refused_unread(client: Client, base: str) -> None:
    started = time.monotonic()
    exchange = client.get(base + "/huge")
    assert time.monotonic() - started < 1
    assert exchange.body_truncated and exchange.body == b""
    assert "52428800 bytes exceeds the 1048576-byte limit" in (exchange.error or "")


def test_an_undeclared_oversized_body_is_cut_at_the_limit(patient: Client, base: str) -> None:
    exchange = patient.get(base + "/huge-chunked")
    assert exchange.body_truncated
    assert len(exchange.body) <= 1024 * 1024
    assert "exceeded the 1048576-byte limit" in (exchange.error or "")


def test_a_stream_of_too_many_events_is_cut_at_the_event_limit(base: str) -> None:
    never = CircuitBreaker(threshold=0)
    with Client(deadline_s=5, max_stream_events=50, breaker=never) as http:
        exchange = http.stream("POST", base + "/endless", json_body={})
    assert exchange.state is StreamState.FAILED
    assert len(exchange.events) == 50
    assert "exceeded the 50-event limit" in (exchange.error or "")


def test_two_transport_failures_open_the_plane_and_later_requests_fail_at_once(
    base: str,
) -> None:
    with Client(deadline_s=0.5) as http:
        for _ in range(2):
            assert http.get(base + "/stall").error
        started = time.monotonic()
        with pytest.raises(
            PlaneUnavailable, match=r"2 consecutive transport failures of GET /stall; first: GET"
        ):
            http.get(base + "/invalid-json")
        assert time.monotonic() - started < 0.1
        assert http.get("http://127.0.0.1:9/other-plane").status is None  # other planes go on


def test_shortened_deadlines_and_other_routes_do_not_open_the_plane(base: str) -> None:
    with Client(deadline_s=0.5) as http:
        for _ in range(4):
            assert http.get(base + "/stall", deadline_s=0.2).error  # the caller expected it
        assert http.get(base + "/stall").error
        assert http.get(base + "/headers-then-stall").error  # another route: its own count
        assert http.breaker.opened() == {}


def test_redirects_are_never_followed(client: Client, base: str) -> None:
    exchange = client.post(base + "/redirect", {"mode": "abort"})
    assert exchange.status == 307
    assert len(client.log) >= 1 and client.log[-1].request.url.endswith("/redirect")


def test_non_stream_answer_to_a_stream_request_fails(client: Client, base: str) -> None:
    exchange = client.stream("POST", base + "/wrong-content-type", json_body={})
    assert exchange.state is StreamState.FAILED
    assert "text/event-stream" in exchange.state_reason


def test_html_error_page_fails_the_stream_with_its_status(client: Client, base: str) -> None:
    exchange = client.stream("POST", base + "/html-500", json_body={})
    assert exchange.status == 500
    assert exchange.state is StreamState.FAILED
    assert "HTTP 500" in exchange.state_reason


def test_connection_reset_mid_stream_fails(client: Client, base: str) -> None:
    exchange = client.stream("POST", base + "/reset", json_body={})
    assert exchange.state is StreamState.FAILED


def test_refused_connection_is_an_error_not_an_exception(client: Client) -> None:
    exchange = client.get("http://127.0.0.1:9/nothing-listens-here")
    assert exchange.status is None
    assert exchange.error and "transport error" in exchange.error


def test_curl_reproducer_quotes_the_body(client: Client, base: str) -> None:
    exchange = client.post(base + "/invalid-json", {"prompt": "it's"})
    assert exchange.curl().startswith("curl -sS -X POST")
    assert "it'\"'\"'s" in exchange.curl()


def test_a_stream_the_client_cancels_ends_canceled_never_success(client: Client, base: str) -> None:
    exchange = client.stream("POST", base + "/endless", json_body={}, cancel_after_events=2)
    assert exchange.state is StreamState.CANCELED
    assert len(exchange.events) == 2
