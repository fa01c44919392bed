"""The request ledger, cancellation on disconnect, retries, delays and /metrics."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_backend_helpers import PROMPT, completions, parse_sse, stream_chunks, wait_for

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.runtime.request_ledger import RequestRecord

LONG = {"max_tokens": 400, "ignore_eos": True}


@pytest.fixture
def dep() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm") as deployment:
        yield deployment


def by_attempt(dep: FakeDeployment, attempt: str) -> list[RequestRecord]:
    return [r for r in dep.request_ledger if r.attempt_id == attempt]


def test_ledger_records_attempts(client: httpx.Client, dep: FakeDeployment) -> None:
    plain = completions(client, dep, prompt=PROMPT, max_tokens=3)
    named = client.post(
        f"{dep.frontend_url}/v1/chat/completions",
        json={
            "model": "toy",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2,
            "stream": True,
        },
        headers={"x-request-id": "attempt-1"},
    )
    assert plain.status_code == named.status_code == 200
    first, second = dep.request_ledger
    assert first.route == "/v1/completions" and first.outcome == "completed"
    assert first.tokens_generated == 3 and first.response_id == plain.json()["id"]
    assert first.worker_instance_id in {w["instance_id"] for w in dep.workers}
    assert first.started_at <= (first.ended_at or 0)
    assert second.attempt_id == "attempt-1" and second.route == "/v1/chat/completions"
    assert second.outcome == "completed" and second.tokens_generated == 2
    assert first.worker_instance_id != second.worker_instance_id  # round-robin
    served = client.get(f"{dep.control_url}/request_ledger").json()["requests"]
    assert [r["attempt_id"] for r in served] == [first.attempt_id, "attempt-1"]
    assert set(served[0]) == {
        "attempt_id",
        "route",
        "response_id",
        "worker_instance_id",
        "started_at",
        "ended_at",
        "outcome",
        "tokens_generated",
    }
    assert client.delete(f"{dep.control_url}/request_ledger").json() == {"requests": []}
    assert dep.request_ledger == []


def test_stream_disconnect_cancels_generation(client: httpx.Client, dep: FakeDeployment) -> None:
    headers = {"x-request-id": "walk-away", "x-fake-token-delay-ms": "5"}
    body = {"model": "toy", "prompt": PROMPT, "stream": True, **LONG}
    with client.stream(
        "POST", f"{dep.frontend_url}/v1/completions", json=body, headers=headers
    ) as reply:
        lines = reply.iter_lines()
        assert next(lines).startswith("data: ")
    gone = time.monotonic()
    wait_for(lambda: by_attempt(dep, "walk-away")[0].outcome is not None, timeout=1.0)
    assert time.monotonic() - gone < 1.0
    (record,) = by_attempt(dep, "walk-away")
    assert record.outcome == "cancelled" and 1 <= record.tokens_generated < 400
    time.sleep(0.05)
    assert by_attempt(dep, "walk-away")[0].tokens_generated == record.tokens_generated


def test_unary_disconnect_cancels_generation(client: httpx.Client, dep: FakeDeployment) -> None:
    with pytest.raises(httpx.ReadTimeout):
        client.post(
            f"{dep.frontend_url}/v1/completions",
            json={"model": "toy", "prompt": PROMPT, "max_tokens": 4},
            headers={"x-request-id": "impatient", "x-fake-delay-ms": "3000"},
            timeout=0.2,
        )
    wait_for(lambda: by_attempt(dep, "impatient")[0].outcome is not None, timeout=1.0)
    (record,) = by_attempt(dep, "impatient")
    assert record.outcome == "cancelled" and record.tokens_generated == 0


def test_delay_header_and_retry(client: httpx.Client, dep: FakeDeployment) -> None:
    body = {"model": "toy", "prompt": PROMPT, "max_tokens": 2, "temperature": 1.0}
    headers = {"x-request-id": "retry-me", "x-fake-delay-ms": "1500"}
    with pytest.raises(httpx.ReadTimeout):
        client.post(f"{dep.frontend_url}/v1/completions", json=body, headers=headers, timeout=0.2)
    started = time.monotonic()
    retry = client.post(
        f"{dep.frontend_url}/v1/completions",
        json=body,
        headers={"x-request-id": "retry-me", "x-fake-delay-ms": "100"},
    )
    assert retry.status_code == 200 and time.monotonic() - started >= 0.1
    assert retry.headers["x-request-id"] == "retry-me"
    wait_for(lambda: all(r.outcome for r in by_attempt(dep, "retry-me")))
    first, second = by_attempt(dep, "retry-me")
    assert (first.outcome, second.outcome) == ("cancelled", "completed")
    assert second.response_id == retry.json()["id"] != first.response_id


def test_disconnect_while_held_is_cancelled(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    pin = {"backend_instance_id": dep.workers[0]["instance_id"]}
    client.post(f"{base}/engine/pause_generation", json={"mode": "keep"})
    with pytest.raises(httpx.ReadTimeout):
        client.post(
            f"{dep.frontend_url}/v1/completions",
            json={"model": "toy", "prompt": PROMPT, "max_tokens": 2, "nvext": pin},
            headers={"x-request-id": "held"},
            timeout=0.2,
        )
    wait_for(lambda: by_attempt(dep, "held")[0].outcome is not None)
    assert by_attempt(dep, "held")[0].outcome == "cancelled"
    assert dep.state.workers[0].runtime.has_requests() is False
    client.post(f"{base}/engine/resume_generation")


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        name, _, rest = series.partition("{")
        labels = tuple(
            (k, v.strip('"'))
            for k, v in (p.split("=", 1) for p in rest.rstrip("}").split(",") if p)
        )
        out[(name, labels)] = float(value)
    return out


def test_metrics_bounded_labels(client: httpx.Client, dep: FakeDeployment) -> None:
    for i in range(3):
        completions(client, dep, prompt=PROMPT, max_tokens=2)
        client.post(
            f"{dep.frontend_url}/v1/chat/completions",
            json={
                "model": "toy",
                "messages": [{"role": "user", "content": f"hi {i}"}],
                "max_tokens": 1,
            },
            headers={"x-request-id": f"chat-{i}"},
        )
    completions(client, dep, prompt=PROMPT, max_tokens=0)  # a 400: counted as an error
    reply = client.get(f"{dep.frontend_url}/metrics")
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"  # recorded
    assert "# TYPE dynamo_frontend_requests_total counter" in reply.text
    samples = _samples(reply.text)
    key = (
        "dynamo_frontend_requests_total",
        (("model", "toy"), ("endpoint", "completions"), ("status", "success")),
    )
    assert samples[key] == 3
    chat_key = (
        "dynamo_frontend_requests_total",
        (("model", "toy"), ("endpoint", "chat_completions"), ("status", "success")),
    )
    assert samples[chat_key] == 3
    error_key = (
        "dynamo_frontend_requests_total",
        (("model", "toy"), ("endpoint", "completions"), ("status", "error")),
    )
    assert samples[error_key] == 1
    tokens = {
        dict(labels)["worker_id"]: v
        for (name, labels), v in samples.items()
        if name == "dynamo_frontend_output_tokens_total"
    }
    assert sum(tokens.values()) == 9 and set(tokens) <= {str(w["instance_id"]) for w in dep.workers}
    allowed = {"model", "endpoint", "status", "worker_id", "le"}
    assert all(k in allowed for _, labels in samples for k, _ in labels)
    count = ("dynamo_frontend_request_duration_seconds_count", key[1][:2])
    assert samples[count] == 4  # the refused request is timed too


def test_sglang_generate_is_ledgered_and_cancellable(
    client: httpx.Client,
) -> None:
    with FakeDeployment("sglang", workers=1) as dep:
        events = parse_sse(
            client.post(
                f"{dep.frontend_url}/generate",
                json={
                    "input_ids": PROMPT,
                    "stream": True,
                    "rid": "sg-1",
                    "sampling_params": {"max_new_tokens": 3},
                },
            ).text
        )
        assert len(stream_chunks(events)) == 3
        (record,) = dep.request_ledger
        assert (record.response_id, record.route, record.outcome) == (
            "sg-1",
            "/generate",
            "completed",
        )
        body: dict[str, Any] = {
            "input_ids": PROMPT,
            "stream": True,
            "sampling_params": {"max_new_tokens": 400, "ignore_eos": True},
        }
        headers = {"x-fake-token-delay-ms": "5", "x-request-id": "sg-walk"}
        with client.stream("POST", f"{dep.frontend_url}/generate", json=body, headers=headers) as r:
            assert json.loads(next(r.iter_lines())[len("data: ") :])["output_ids"]
        wait_for(lambda: by_attempt(dep, "sg-walk")[0].outcome is not None, timeout=1.0)
        assert by_attempt(dep, "sg-walk")[0].outcome == "cancelled"
