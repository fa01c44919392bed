"""The fake frontend's request migration: a stream whose worker's process is killed goes on on
another worker under --migration-limit, ends in Dynamo 1.6.1's error event without it, and the
``migration_repeats_splice_token`` fault repeats the token before the splice."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_backend_helpers import PROMPT, faulted, shows

from fake_backends.deployment.assembly import FakeDeployment
from rl_conformance.wire import prometheus

MAX_TOKENS = 120
BODY = {
    "model": "toy",
    "prompt": PROMPT,
    "max_tokens": MAX_TOKENS,
    "temperature": 0,
    "ignore_eos": True,
    "stream": True,
    "nvext": {"extra_fields": ["completion_token_ids", "worker_id"]},
}


@pytest.fixture
def migrating() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", workers=2, migration_limit=1) as dep:
        yield dep


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def killed_stream(client: httpx.Client, dep: FakeDeployment) -> list[Any]:
    """A slow stream's events, the worker its first chunk names killed after a few tokens, then
    started again."""
    events: list[Any] = []
    started = threading.Event()

    def read() -> None:
        headers = {"x-fake-token-delay-ms": "5"}
        with client.stream(
            "POST", f"{dep.frontend_url}/v1/completions", json=BODY, headers=headers
        ) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: "):
                    data = line[6:]
                    events.append(data if data == "[DONE]" else json.loads(data))
                    if len(events) == 5:
                        started.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert started.wait(10)
    serving = events[0]["nvext"]["worker_id"]["decode_worker_id"]
    url = next(w["system_url"] for w in dep.workers if w["instance_id"] == serving)
    kill = {"system_url": url, "killed": True}
    assert client.post(f"{dep.control_url}/worker_kill", json=kill).status_code == 200
    reader.join(10)
    revive = {"system_url": url, "killed": False}
    assert client.post(f"{dep.control_url}/worker_kill", json=revive).status_code == 200
    return events


def ids_of(events: list[Any]) -> list[int]:
    found: list[int] = []
    for event in events:
        if isinstance(event, dict):
            found += (event.get("nvext") or {}).get("completion_token_ids") or []
    return found


def unbroken(client: httpx.Client, dep: FakeDeployment) -> list[int]:
    body = {**BODY, "stream": False}
    ids: list[int] = client.post(f"{dep.frontend_url}/v1/completions", json=body).json()["nvext"][
        "completion_token_ids"
    ]
    return ids


def test_a_stream_whose_worker_is_killed_goes_on_elsewhere(
    client: httpx.Client, migrating: FakeDeployment
) -> None:
    reference = unbroken(client, migrating)
    events = killed_stream(client, migrating)
    assert events[-1] == "[DONE]"
    assert ids_of(events) == reference
    # the killed worker serves again once started again, and counts nothing still in flight
    assert len(unbroken(client, migrating)) == MAX_TOKENS
    for worker in migrating.workers:
        samples = prometheus.parse(client.get(f"{worker['system_url']}/metrics").text)
        assert prometheus.total(samples, "dynamo_component_inflight_requests") == 0


def test_without_migration_the_stream_ends_in_the_recorded_error() -> None:
    with FakeDeployment("vllm", workers=2) as dep, httpx.Client(timeout=30) as client:
        events = killed_stream(client, dep)
    assert events[-2] == {
        "error": {
            "message": "Service temporarily unavailable",
            "type": "service_unavailable",
            "code": 503,
        }
    }
    assert events[-1] == "[DONE]"
    assert len(ids_of(events)) < MAX_TOKENS


@shows("migration_repeats_splice_token")
def test_migration_repeats_splice_token(client: httpx.Client, migrating: FakeDeployment) -> None:
    reference = unbroken(client, migrating)
    with faulted(migrating, "migration_repeats_splice_token"):
        ids = ids_of(killed_stream(client, migrating))
    assert len(ids) == MAX_TOKENS + 1
    at = next(k for k, (a, b) in enumerate(zip(ids, reference, strict=False)) if a != b)
    assert ids[at] == ids[at - 1]
