"""Small helpers shared by the fake_backends tests (SSE parsing, request shortcuts)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.faults.deployment import FAULT_NAMES

DONE = "[DONE]"
F = TypeVar("F", bound=Callable[..., Any])

# Faults some test has shown to manifest (test_every_fault_is_demonstrated checks all).
DEMONSTRATED: set[str] = set()


def shows(*names: str) -> Callable[[F], F]:
    """Register a test as the demonstration of the named faults."""
    for name in names:
        assert name in FAULT_NAMES, name
    DEMONSTRATED.update(names)
    return lambda test: test


@contextmanager
def faulted(dep: FakeDeployment, *names: str) -> Iterator[None]:
    dep.set_faults(names)
    try:
        yield
    finally:
        dep.set_faults([])


def admin(client: httpx.Client, base: str, route: str, body: Any = None) -> Any:
    """POST ``{base}/engine/{route}`` and parse the JSON text reply (HTTP 200 expected)."""
    reply = client.post(f"{base}/engine/{route}", json={} if body is None else body)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"
    return json.loads(reply.text)


def parse_sse(text: str) -> list[Any]:
    """Strictly parse an SSE body made of ``data: <json>\\n\\n`` frames.

    Returns the decoded payloads, with the string ``"[DONE]"`` for the terminator.
    """
    assert text.endswith("\n\n") or text == "", (
        f"stream does not end with a blank line: {text[-40:]!r}"
    )
    events: list[Any] = []
    for block in text.split("\n\n")[:-1]:
        assert block.startswith("data: "), f"bad frame {block[:60]!r}"
        assert "\n" not in block, f"multi-line frame {block[:60]!r}"
        payload = block[len("data: ") :]
        events.append(DONE if payload == DONE else json.loads(payload))
    return events


def completions(client: httpx.Client, dep: FakeDeployment, **body: Any) -> httpx.Response:
    """POST /v1/completions, naming the served model unless `model` is given (None: omitted,
    which the frontend refuses)."""
    return client.post(f"{dep.frontend_url}/v1/completions", json=_with_model(dep, body))


def chat(client: httpx.Client, dep: FakeDeployment, **body: Any) -> httpx.Response:
    body.setdefault("messages", [{"role": "user", "content": "hello there"}])
    return client.post(f"{dep.frontend_url}/v1/chat/completions", json=_with_model(dep, body))


def _with_model(dep: FakeDeployment, body: dict[str, Any]) -> dict[str, Any]:
    body.setdefault("model", dep.model)
    return {key: value for key, value in body.items() if key != "model" or value is not None}


def generate(client: httpx.Client, dep: FakeDeployment, **body: Any) -> httpx.Response:
    body.setdefault("stream", True)
    return client.post(f"{dep.frontend_url}/generate", json=body)


def stream_events(client: httpx.Client, dep: FakeDeployment, **body: Any) -> list[Any]:
    """The events of a streamed completion (the [DONE] marker included)."""
    return parse_sse(completions(client, dep, stream=True, **body).text)


def sglang_final(
    client: httpx.Client, dep: FakeDeployment, **body: Any
) -> tuple[list[Any], dict[str, Any]]:
    """The events of SGLang's native stream of `PROMPT`, and its last JSON chunk."""
    events = parse_sse(generate(client, dep, input_ids=PROMPT, **body).text)
    return events, stream_chunks(events)[-1]


def rl_workers(client: httpx.Client, dep: FakeDeployment) -> dict[str, Any]:
    response = client.get(f"{dep.rl_url}/v1/rl/workers")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def stream_chunks(events: list[Any]) -> list[dict[str, Any]]:
    """The JSON chunks of a stream (without the [DONE] marker)."""
    return [e for e in events if e != DONE]


ALL_SELECTORS = [
    "completion_token_ids",
    "prompt_token_ids",
    "prompt_logprobs",
    "engine_data",
    "timing",
    "worker_id",
    "stop_reason",
    "detailed_finish_reason",
]

PROMPT = [300, 4000, 12345, 777, 20000]
IDS = {"extra_fields": ["completion_token_ids"]}
"""The nvext selector that asks for the completion's token ids."""


def wait_for(predicate: Callable[[], bool], timeout: float = 2.0) -> None:
    """Poll until `predicate()` holds; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


LONG_PROMPT = list(range(300, 340))


def greedy(client: httpx.Client, dep: FakeDeployment, index: int = 0, **body: Any) -> Any:
    """A greedy completion pinned to worker `index`, with its ids and engine data."""
    nvext = {
        "backend_instance_id": dep.workers[index]["instance_id"],
        "extra_fields": ["completion_token_ids", "engine_data"],
    }
    body = {
        "model": dep.model,
        "prompt": PROMPT,
        "max_tokens": 4,
        "temperature": 0,
        "nvext": nvext,
        **body,
    }
    return client.post(f"{dep.frontend_url}/v1/completions", json=body).json()


def ids(response: Any) -> list[int]:
    result: list[int] = response["nvext"]["completion_token_ids"]
    return result


def zero(client: httpx.Client, dep: FakeDeployment) -> dict[str, Any]:
    """Worker 0 as RL discovery lists it (exactly once)."""
    entries: list[dict[str, Any]] = [
        w
        for w in rl_workers(client, dep)["workers"]
        if w["instance_id"] == dep.workers[0]["instance_id"]
    ]
    assert len(entries) == 1
    return entries[0]
