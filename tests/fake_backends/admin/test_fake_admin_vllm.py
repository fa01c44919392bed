"""vLLM worker administration with real semantics: pause modes, updates, cache, abort.

Each test starts its own deployment: these tests change worker state.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_backend_helpers import DONE, PROMPT, admin, faulted, shows, stream_chunks, wait_for

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.runtime.request_ledger import RequestRecord

FLOWS = Path(__file__).resolve().parents[3] / "fixtures" / "dynamo-1.6.1" / "toy-worker"
LONG_PROMPT = list(range(300, 340))  # 40 tokens: two full 16-token blocks
IDS = ["completion_token_ids", "engine_data", "detailed_finish_reason"]


@pytest.fixture
def dep() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm") as deployment:
        yield deployment


def pinned(dep: FakeDeployment, index: int, **nvext: Any) -> dict[str, Any]:
    return {"backend_instance_id": dep.workers[index]["instance_id"], **nvext}


def greedy(client: httpx.Client, dep: FakeDeployment, index: int, **body: Any) -> dict[str, Any]:
    body.setdefault("model", "toy")
    body.setdefault("prompt", PROMPT)
    body.setdefault("max_tokens", 4)
    reply = client.post(
        f"{dep.frontend_url}/v1/completions",
        json={"temperature": 0, "nvext": pinned(dep, index, extra_fields=IDS), **body},
    )
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()
    return result


class Background:
    """A request running in a thread; streams record each event as it arrives."""

    def __init__(self, client: httpx.Client, url: str, body: dict[str, Any], **headers: str):
        self.events: list[Any] = []
        self.body: dict[str, Any] | None = None
        self.done = threading.Event()

        def run() -> None:
            try:
                if body.get("stream"):
                    with client.stream("POST", url, json=body, headers=headers) as reply:
                        for line in reply.iter_lines():
                            if line.startswith("data: "):
                                payload = line[len("data: ") :]
                                self.events.append(DONE if payload == DONE else json.loads(payload))
                else:
                    self.body = client.post(url, json=body, headers=headers).json()
            finally:
                self.done.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> None:
        assert self.done.wait(5), "background request did not finish"


def records(dep: FakeDeployment, attempt: str) -> list[RequestRecord]:
    return [r for r in dep.request_ledger if r.attempt_id == attempt]


def test_recorded_flow_replies(client: httpx.Client, dep: FakeDeployment) -> None:
    """The admin calls of the recorded 1.6.1 flow answer the recorded bodies."""
    base = dep.workers[0]["system_url"]
    cases = ["admin_update_weights_unpaused", "admin_get_weight_version"] + [
        p.stem for p in sorted(FLOWS.glob("flow_*.json"))
    ]
    for case in cases:
        recorded = json.loads((FLOWS / f"{case}.json").read_text())
        request, expected = recorded["request"], recorded["response"]
        if request["target"] != "system":
            continue
        reply = client.request(request["method"], base + request["url_path"], json=request["body"])
        assert reply.status_code == expected["status"], case
        assert reply.headers["content-type"] == expected["headers"]["content-type"], case
        got = json.loads(reply.text)
        # The recording engine added toy_seed/previous_toy_seed to its update reply.
        assert got == {k: v for k, v in expected["body"].items() if "toy_seed" not in k}, case


def test_pause_keep_freezes_in_flight_and_holds_new(
    client: httpx.Client, dep: FakeDeployment
) -> None:
    base = dep.workers[0]["system_url"]
    url = f"{dep.frontend_url}/v1/completions"
    stream = Background(
        client,
        url,
        {
            "model": "toy",
            "prompt": PROMPT,
            "max_tokens": 8,
            "stream": True,
            "nvext": pinned(dep, 0),
        },
        **{"x-request-id": "frozen", "x-fake-token-delay-ms": "20"},
    )
    wait_for(lambda: len(stream.events) >= 2)
    assert admin(client, base, "pause_generation", {"mode": "keep"})["mode"] == "keep"
    # Counted by the server: how many events the client thread has read by now is a matter of
    # scheduling.
    (frozen,) = records(dep, "frozen")
    frozen_at = frozen.tokens_generated
    held = Background(
        client,
        url,
        {"model": "toy", "prompt": PROMPT, "max_tokens": 2, "nvext": pinned(dep, 0)},
        **{"x-request-id": "held"},
    )
    other = greedy(client, dep, 1)  # the other worker is not paused
    time.sleep(0.15)
    (still,) = records(dep, "frozen")
    assert still.tokens_generated <= frozen_at + 1  # at most the token already in flight
    assert not held.done.is_set()
    (waiting,) = records(dep, "held")
    assert waiting.outcome is None and waiting.tokens_generated == 0
    assert other["choices"][0]["finish_reason"] == "length"
    admin(client, base, "resume_generation")
    stream.join()
    held.join()
    assert stream.events[-1] == DONE and len(stream_chunks(stream.events)) == 8
    assert held.body is not None and held.body["usage"]["completion_tokens"] == 2
    assert [r.outcome for r in records(dep, "frozen") + records(dep, "held")] == ["completed"] * 2


def test_pause_wait_lets_in_flight_finish(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    url = f"{dep.frontend_url}/v1/completions"
    stream = Background(
        client,
        url,
        {
            "model": "toy",
            "prompt": PROMPT,
            "max_tokens": 6,
            "stream": True,
            "nvext": pinned(dep, 0),
        },
        **{"x-request-id": "draining", "x-fake-token-delay-ms": "20"},
    )
    wait_for(lambda: len(stream.events) >= 1)
    admin(client, base, "pause_generation", {"mode": "wait"})
    (record,) = records(dep, "draining")  # the pause returned once it had finished
    assert record.outcome == "completed" and record.tokens_generated == 6
    held = Background(
        client,
        url,
        {"model": "toy", "prompt": PROMPT, "max_tokens": 1, "nvext": pinned(dep, 0)},
        **{"x-request-id": "late"},
    )
    time.sleep(0.1)
    assert not held.done.is_set()
    admin(client, base, "resume_generation")
    held.join()
    assert records(dep, "late")[0].outcome == "completed"


def test_pause_abort_ends_in_flight(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    url = f"{dep.frontend_url}/v1/completions"
    stream = Background(
        client,
        url,
        {
            "model": "toy",
            "prompt": PROMPT,
            "max_tokens": 200,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
            "nvext": pinned(dep, 0, extra_fields=["detailed_finish_reason"]),
        },
        **{"x-request-id": "cut-stream", "x-fake-token-delay-ms": "10"},
    )
    unary = Background(
        client,
        url,
        {
            "model": "toy",
            "prompt": PROMPT,
            "max_tokens": 5,
            "nvext": pinned(dep, 0, extra_fields=IDS),
        },
        **{"x-request-id": "cut-unary", "x-fake-delay-ms": "3000"},
    )
    wait_for(lambda: len(stream.events) >= 2 and bool(records(dep, "cut-unary")))
    admin(client, base, "pause_generation", {"mode": "abort"})
    stream.join()
    unary.join()
    *tokens, cancel, usage, done = stream.events
    assert done == DONE and usage["choices"] == []
    assert cancel["choices"][0] == {"text": "", "index": 0, "finish_reason": "stop"}
    assert cancel["nvext"] == {"detailed_finish_reason": "cancelled"}
    assert usage["usage"]["completion_tokens"] == len(tokens) < 200
    assert all("finish_reason" not in t["choices"][0] for t in tokens)
    assert unary.body is not None
    (choice,) = unary.body["choices"]
    assert choice["finish_reason"] == "stop" and choice["text"] == ""
    assert unary.body["nvext"]["detailed_finish_reason"] == "cancelled"
    assert unary.body["nvext"]["completion_token_ids"] == []
    assert unary.body["usage"]["completion_tokens"] == 0
    outcomes = [(r.outcome, r.tokens_generated) for r in records(dep, "cut-stream")]
    assert outcomes == [("aborted", len(tokens))]
    assert records(dep, "cut-unary")[0].outcome == "aborted"
    # New requests are held until resume, then run normally.
    held = Background(
        client, url, {"model": "toy", "prompt": PROMPT, "max_tokens": 1, "nvext": pinned(dep, 0)}
    )
    time.sleep(0.05)
    assert not held.done.is_set()
    admin(client, base, "resume_generation")
    held.join()


def test_update_changes_tokens_version_and_cache(client: httpx.Client, dep: FakeDeployment) -> None:
    base0, base1 = (w["system_url"] for w in dep.workers)
    before = greedy(client, dep, 0, prompt=LONG_PROMPT)
    again = greedy(client, dep, 0, prompt=LONG_PROMPT)
    assert before["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 32
    assert again["nvext"]["completion_token_ids"] == before["nvext"]["completion_token_ids"]
    assert admin(client, base0, "pause_generation")["mode"] == "keep"
    update = {"model_path": "/ckpt/step-1", "weight_version": "step-1"}
    assert admin(client, base0, "update_weights_from_disk", update) == {
        "status": "ok",
        "version": "step-1",
        "version_declared": True,
    }
    assert admin(client, base0, "get_weight_version") == {
        "status": "ok",
        "version": "step-1",
        "version_declared": True,
    }
    admin(client, base0, "resume_generation")
    after = greedy(client, dep, 0, prompt=LONG_PROMPT)
    assert after["nvext"]["completion_token_ids"] != before["nvext"]["completion_token_ids"]
    assert after["nvext"]["engine_data"]["weight_version"] == "step-1"
    assert after["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # reset by the update
    # Worker 1 still serves the old weights: a mixed fleet is visible.
    old = greedy(client, dep, 1, prompt=LONG_PROMPT)
    assert old["nvext"]["completion_token_ids"] == before["nvext"]["completion_token_ids"]
    assert old["nvext"]["engine_data"]["weight_version"] is None
    # The same checkpoint gives the same weights; no version: "unknown", declaration kept.
    admin(client, base1, "pause_generation")
    assert admin(client, base1, "update_weights_from_disk", {"model_path": "/ckpt/step-1"}) == {
        "status": "ok",
        "version": "unknown",
        "version_declared": False,
    }
    assert admin(client, base1, "get_weight_version")["version"] is None
    admin(client, base1, "resume_generation")
    same = greedy(client, dep, 1, prompt=LONG_PROMPT)
    assert same["nvext"]["completion_token_ids"] == after["nvext"]["completion_token_ids"]


def test_flush_cache_and_chat_cached_tokens(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    messages = [{"role": "user", "content": "a fairly long message to fill a block or two"}]
    chat = {"model": "toy", "messages": messages, "max_tokens": 2, "nvext": pinned(dep, 0)}
    url = f"{dep.frontend_url}/v1/chat/completions"
    first = client.post(url, json=chat).json()["usage"]
    second = client.post(url, json=chat).json()["usage"]
    assert first["prompt_tokens"] >= 16 and first["prompt_tokens_details"] == {"cached_tokens": 0}
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0 and cached % 16 == 0 and cached <= second["prompt_tokens"]
    assert admin(client, base, "flush_cache") == {"status": "ok", "message": "Cache flushed"}
    third = client.post(url, json=chat).json()["usage"]
    assert third["prompt_tokens_details"] == {"cached_tokens": 0}
    # pause(abort|wait) with clear_cache also empties it; keep ignores clear_cache.
    client.post(url, json=chat)
    admin(client, base, "pause_generation", {"mode": "keep", "clear_cache": True})
    admin(client, base, "resume_generation")
    assert client.post(url, json=chat).json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    admin(client, base, "pause_generation", {"mode": "wait", "clear_cache": True})
    admin(client, base, "resume_generation")
    kept = client.post(url, json=chat).json()["usage"]["prompt_tokens_details"]
    assert kept == {"cached_tokens": 0}


def test_abort_request_by_id(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    stream = Background(
        client,
        f"{dep.frontend_url}/v1/chat/completions",
        {
            "model": "toy",
            "messages": [{"role": "user", "content": "go on"}],
            "max_tokens": 300,
            "ignore_eos": True,
            "stream": True,
            "nvext": pinned(dep, 0, extra_fields=["detailed_finish_reason"]),
        },
        **{"x-request-id": "abort-me", "x-fake-token-delay-ms": "10"},
    )
    wait_for(lambda: len(stream.events) >= 2)
    assert admin(client, base, "abort_request", {"request_id": "abort-me"}) == {
        "status": "ok",
        "request_id": "abort-me",
    }
    stream.join()
    last = stream_chunks(stream.events)[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["choices"][0]["delta"] == {}  # no text, no content (a real 1.6.1 delta)
    assert last["nvext"]["detailed_finish_reason"] == "cancelled"
    assert records(dep, "abort-me")[0].outcome == "aborted"
    # An unknown id is not an error (vLLM aborts nothing); a missing one is.
    assert admin(client, base, "abort_request", {"request_id": "nobody"})["status"] == "ok"
    assert admin(client, base, "abort_request", {})["status"] == "error"


def test_distributed_update_rules(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    before = greedy(client, dep, 0)["nvext"]["completion_token_ids"]
    unpaused = admin(client, base, "update_weights_from_distributed", {"names": ["w"]})
    assert unpaused["status"] == "error" and "paused" in unpaused["message"]
    resets = admin(client, base, "update_weights_from_distributed", {"allow_unpaused": True})
    assert resets["status"] == "error" and "reset the prefix cache" in resets["message"]
    assert admin(client, base, "update_weights_from_distributed", {"allow_unpaused": 1}) == {
        "status": "error",
        "message": "'allow_unpaused' must be a boolean",
    }
    live = {
        "allow_unpaused": True,
        "reset_prefix_cache": False,
        "names": ["w"],
        "weight_version": 3,
    }
    without_group = admin(client, base, "update_weights_from_distributed", live)
    assert without_group["status"] == "error" and "weight update group" in without_group["message"]
    admin(client, base, "init_weights_update_group", {"master_address": "x"})
    assert admin(client, base, "update_weights_from_distributed", live) == {
        "status": "ok",
        "version": 3,
        "version_declared": True,
    }
    changed = greedy(client, dep, 0)
    assert changed["nvext"]["completion_token_ids"] != before
    assert changed["nvext"]["engine_data"]["weight_version"] == 3
    assert admin(client, base, "init_weights_update_group", {"master_address": "x"}) == {
        "status": "ok",
        "message": "Weight update group initialized",
    }
    assert admin(client, base, "destroy_weights_update_group") == {
        "status": "ok",
        "message": "Weight update group destroyed",
    }
    assert admin(client, base, "update_weights_from_tensor", {"x": 1}) == {
        "status": "error",
        "message": "update_weights_from_tensor is not implemented",
    }
    assert admin(client, base, "liveness_probe") == {"status": "ok", "alive": True}


def test_bad_admin_family() -> None:
    with pytest.raises(ValueError, match="admin family"):
        FakeDeployment("vllm", admin_family="rust")
    with pytest.raises(ValueError, match="needs backend vllm"):
        FakeDeployment("sglang", admin_family="sidecar")


def test_admin_ledger_on_control_port(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    admin(client, base, "set_weight_version", {"weight_version": "x"})
    client.post(f"{base}/engine/nope", content=b"{bad")
    served = client.get(f"{dep.control_url}/admin_ledger").json()["requests"]
    assert [(r["method"], r["path"], r["status"]) for r in served] == [
        ("POST", "/engine/set_weight_version", 200),
        ("POST", "/engine/nope", 400),
    ]
    assert served[0]["body"] == {"weight_version": "x"} and served[1]["body"] == "{bad"
    assert served[0]["reply"] == {"status": "ok", "version": "x"}
    assert served[0]["instance_id"] == dep.workers[0]["instance_id"]
    assert isinstance(served[0]["received_at"], float)
    assert client.delete(f"{dep.control_url}/admin_ledger").json() == {"requests": []}
    assert dep.admin_ledger == []


@shows("abort_reported_as_stop", "crossed_stream_length_short", "crossed_stream_raw_abort")
@pytest.mark.parametrize(
    ("fault", "finish", "detailed"),
    [
        ("abort_reported_as_stop", "stop", "stop"),
        ("crossed_stream_length_short", "length", "length"),
        ("crossed_stream_raw_abort", "abort", "cancelled"),
    ],
)
def test_a_stream_an_abort_cut_misreports_its_finish(
    client: httpx.Client, dep: FakeDeployment, fault: str, finish: str, detailed: str
) -> None:
    base = dep.workers[0]["system_url"]
    body = {
        "model": "toy",
        "prompt": PROMPT,
        "max_tokens": 200,
        "ignore_eos": True,
        "stream": True,
        "nvext": pinned(dep, 0, extra_fields=["completion_token_ids", "detailed_finish_reason"]),
    }
    with faulted(dep, fault):
        stream = Background(
            client,
            f"{dep.frontend_url}/v1/completions",
            body,
            **{"x-request-id": f"cut-{fault}", "x-fake-token-delay-ms": "10"},
        )
        wait_for(lambda: len(stream.events) >= 2)
        admin(client, base, "pause_generation", {"mode": "abort"})
        stream.join()
        admin(client, base, "resume_generation")
    *chunks, cancel, done = stream.events
    assert done == DONE
    assert cancel["choices"][0]["finish_reason"] == finish
    assert cancel["nvext"]["detailed_finish_reason"] == detailed
    assert 0 < sum(len(c["nvext"]["completion_token_ids"]) for c in chunks) < 200
