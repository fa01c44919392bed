"""The fake frontend's request trace (the DYN_REQUEST_TRACE* variables of the real one) and the
faults that break correlation: stream payload rows without their captured headers, streams
without an end row, an X-RL-* value as a metric label. Imported by test_fake_faults.py, which
holds the demonstration bookkeeping."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_backend_helpers import PROMPT, completions, faulted, shows

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.runtime.request_trace import RequestTrace

HEADERS = {"x-rl-rollout-id": "r1", "x-rl-policy-version": "p0"}
CAPTURE = "x-rl-attempt-id,x-rl-rollout-id,x-rl-policy-version"


@pytest.fixture
def traced(vllm: FakeDeployment, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "trace.jsonl"
    trace = RequestTrace.from_environment(
        {
            "DYN_REQUEST_TRACE": "1",
            "DYN_REQUEST_TRACE_RECORDS": "request_end,request_payload",
            "DYN_REQUEST_TRACE_FILE_PATH": str(path),
            "DYN_REQUEST_TRACE_HTTP_HEADER_CAPTURE_LIST": CAPTURE,
        }
    )
    before, vllm.state.request_trace = vllm.state.request_trace, trace
    try:
        yield path
    finally:
        vllm.state.request_trace = before


def rows(path: Path) -> list[dict[str, Any]]:
    """The trace's rows, unwrapped from the 1.6.1 file sink's {"timestamp", "event"}."""
    return [json.loads(line)["event"] for line in path.read_text().splitlines()]


def send(client: httpx.Client, dep: FakeDeployment, attempt: str, *, stream: bool) -> None:
    response = client.post(
        f"{dep.frontend_url}/v1/chat/completions",
        json={
            "model": "toy",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 3,
            "stream": stream,
        },
        headers={**HEADERS, "x-rl-attempt-id": attempt},
    )
    assert response.status_code == 200


def test_the_trace_joins_chat_payloads_and_ends(
    client: httpx.Client, vllm: FakeDeployment, traced: Path
) -> None:
    send(client, vllm, "a1", stream=False)
    send(client, vllm, "a2", stream=True)
    completions(client, vllm, prompt=PROMPT, max_tokens=2)
    found = rows(traced)
    payloads = [r for r in found if r["event_type"] == "request_payload"]
    ends = [r for r in found if r["event_type"] == "request_end"]
    assert [p["payload"]["http_request_headers"]["x-rl-attempt-id"] for p in payloads] == [
        "a1",
        "a2",
    ]
    assert {p["payload"]["endpoint"] for p in payloads} == {"openai.chat_completion"}
    assert len(ends) == 3  # completions get an end row, no payload row (as observed on 1.6.1)
    assert {p["payload"]["request_id"] for p in payloads} <= {
        e["request"]["request_id"] for e in ends
    }


@shows("trace_stream_headers_dropped")
def test_trace_stream_headers_dropped(
    client: httpx.Client, vllm: FakeDeployment, traced: Path
) -> None:
    with faulted(vllm, "trace_stream_headers_dropped"):
        send(client, vllm, "u", stream=False)
        send(client, vllm, "s", stream=True)
    payloads = [r["payload"] for r in rows(traced) if r["event_type"] == "request_payload"]
    assert payloads[0]["http_request_headers"]["x-rl-attempt-id"] == "u"
    assert "http_request_headers" not in payloads[1]


@shows("trace_stream_end_missing")
def test_trace_stream_end_missing(client: httpx.Client, vllm: FakeDeployment, traced: Path) -> None:
    with faulted(vllm, "trace_stream_end_missing"):
        send(client, vllm, "u", stream=False)
        send(client, vllm, "s", stream=True)
    found = rows(traced)
    assert [r["event_type"] for r in found] == [
        "request_payload",
        "request_end",
        "request_payload",
    ]


@shows("metrics_rl_attempt_label")
def test_metrics_rl_attempt_label(client: httpx.Client, vllm: FakeDeployment) -> None:
    url = f"{vllm.frontend_url}/v1/completions"
    body = {"model": "toy", "prompt": PROMPT, "max_tokens": 1}
    client.post(url, json=body, headers={"x-rl-attempt-id": "plain-attempt"})
    assert "plain-attempt" not in client.get(f"{vllm.frontend_url}/metrics").text
    with faulted(vllm, "metrics_rl_attempt_label"):
        client.post(url, json=body, headers={"x-rl-attempt-id": "labelled-attempt"})
    assert 'rl_attempt_id="labelled-attempt"' in client.get(f"{vllm.frontend_url}/metrics").text
