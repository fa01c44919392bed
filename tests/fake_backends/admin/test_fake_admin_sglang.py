"""SGLang worker administration: built-in control routes, native routes, the allowlist."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_backend_helpers import PROMPT, admin, parse_sse, rl_workers, stream_chunks, wait_for

from fake_backends.admin.sglang_routes import EngineRouteDescriptor, parse_engine_routes
from fake_backends.deployment.assembly import FakeDeployment

PIN = "x-dynamo-worker-instance-id"


@pytest.fixture
def dep() -> Iterator[FakeDeployment]:
    with FakeDeployment("sglang") as deployment:
        yield deployment


def native(
    client: httpx.Client, dep: FakeDeployment, index: int | None, **extra: Any
) -> dict[str, Any]:
    """The final event of a greedy /generate on worker ``index`` (None: routed)."""
    headers = {} if index is None else {PIN: str(dep.workers[index]["instance_id"])}
    body = {"input_ids": PROMPT, "stream": True, "sampling_params": {"max_new_tokens": 4}}
    reply = client.post(f"{dep.frontend_url}/generate", json={**body, **extra}, headers=headers)
    assert reply.status_code == 200, reply.text
    final: dict[str, Any] = stream_chunks(parse_sse(reply.text))[-1]
    return final


def background(
    client: httpx.Client, url: str, body: Any, headers: dict[str, str]
) -> threading.Thread:
    thread = threading.Thread(
        target=lambda: client.post(url, json=body, headers=headers), daemon=True
    )
    thread.start()
    return thread


def test_system_servers_and_shapes(client: httpx.Client, dep: FakeDeployment) -> None:
    assert rl_workers(client, dep)["workers"] == []  # SGLang does not register
    base = dep.workers[0]["system_url"]
    health = json.loads(client.get(f"{base}/health").text)
    assert health["endpoints"] == {"generate": "ready"}
    # clear_kv_blocks is a request-plane endpoint, not an /engine route.
    assert client.post(f"{base}/engine/clear_kv_blocks").status_code == 404
    assert client.post(f"{base}/engine/pause_generation", json=[1]).status_code == 500
    missing = client.post(f"{base}/engine/control/update_weights_from_disk", json={})
    assert missing.status_code == 500
    assert json.loads(missing.text) == {
        "error": "Handler error",
        "message": "UpdateWeightFromDiskReqInput.__init__() missing 1 required positional "
        "argument: 'model_path'",
    }
    unknown = client.post(
        f"{base}/engine/control/update_weight_version", json={"new_version": "a", "nope": 1}
    )
    assert unknown.status_code == 500 and "unexpected keyword argument 'nope'" in unknown.text
    assert admin(client, base, "pause_generation", {"mode": "bogus"})["success"] is False


def test_update_from_disk_waits_for_in_flight(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    before = native(client, dep, 0)
    assert before["meta_info"]["weight_version"] == "default"
    slow = background(
        client,
        f"{dep.frontend_url}/generate",
        {"input_ids": PROMPT, "stream": True, "sampling_params": {"max_new_tokens": 6}},
        {
            PIN: str(dep.workers[0]["instance_id"]),
            "x-fake-token-delay-ms": "20",
            "x-request-id": "slow",
        },
    )
    wait_for(lambda: any(r.attempt_id == "slow" and r.tokens_generated for r in dep.request_ledger))
    reply = admin(
        client,
        base,
        "control/update_weights_from_disk",
        {"model_path": "/ckpt/2", "weight_version": "v2"},
    )
    assert reply == {
        "success": True,
        "message": "Succeeded to update model weights.",
        "num_paused_requests": 0,
    }
    (slow_record,) = [r for r in dep.request_ledger if r.attempt_id == "slow"]
    assert slow_record.outcome == "completed" and slow_record.tokens_generated == 6
    slow.join(5)
    after = native(client, dep, 0)
    assert after["meta_info"]["weight_version"] == "v2"
    assert after["output_ids"] != before["output_ids"]
    other = native(client, dep, 1)
    assert other["output_ids"] == before["output_ids"]  # worker 1 untouched


def test_update_weight_version_is_metadata_and_aborts(
    client: httpx.Client, dep: FakeDeployment
) -> None:
    base = dep.workers[0]["system_url"]
    before = native(client, dep, 0)
    keep = {"new_version": "v7", "abort_all_requests": False}
    assert admin(client, base, "control/update_weight_version", keep) == {
        "success": True,
        "message": "Weight version updated to v7",
        "new_version": "v7",
    }
    after = native(client, dep, 0)
    assert after["output_ids"] == before["output_ids"]
    assert after["meta_info"]["weight_version"] == "v7"
    running = background(
        client,
        f"{dep.frontend_url}/generate",
        {
            "input_ids": PROMPT,
            "stream": True,
            "sampling_params": {"max_new_tokens": 300, "ignore_eos": True},
        },
        {
            PIN: str(dep.workers[0]["instance_id"]),
            "x-fake-token-delay-ms": "10",
            "x-request-id": "victim",
        },
    )
    wait_for(
        lambda: any(r.attempt_id == "victim" and r.tokens_generated for r in dep.request_ledger)
    )
    admin(client, base, "control/update_weight_version", {"new_version": "v8"})  # aborts
    running.join(5)
    (victim,) = [r for r in dep.request_ledger if r.attempt_id == "victim"]
    assert victim.outcome == "aborted" and victim.tokens_generated < 300


def test_abort_event_shape(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    events: list[Any] = []

    def run() -> None:
        body = {
            "input_ids": PROMPT,
            "stream": True,
            "sampling_params": {"max_new_tokens": 300, "ignore_eos": True},
        }
        headers = {PIN: str(dep.workers[0]["instance_id"]), "x-fake-token-delay-ms": "10"}
        events.extend(
            parse_sse(client.post(f"{dep.frontend_url}/generate", json=body, headers=headers).text)
        )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_for(lambda: any(r.tokens_generated >= 2 for r in dep.request_ledger))
    assert admin(client, base, "pause_generation", {"mode": "abort"}) == {"status": "ok"}
    thread.join(5)
    final = stream_chunks(events)[-1]
    assert final["meta_info"]["finish_reason"] == {"type": "abort", "message": "Aborted"}
    assert final["meta_info"]["completion_tokens"] == len(final["output_ids"]) < 300
    assert events[-1] == "[DONE]"
    assert admin(client, base, "continue_generation") == {"status": "ok"}


def test_paused_worker_leaves_routing(client: httpx.Client, dep: FakeDeployment) -> None:
    base0 = dep.workers[0]["system_url"]
    first, second = (w["instance_id"] for w in dep.workers)
    assert admin(client, base0, "pause_generation", {"mode": "in_place"}) == {"status": "ok"}
    for _ in range(3):
        native(client, dep, None)
    assert {r.worker_instance_id for r in dep.request_ledger} == {second}
    held = background(
        client,
        f"{dep.frontend_url}/generate",
        {"input_ids": PROMPT, "stream": True, "sampling_params": {"max_new_tokens": 1}},
        {PIN: str(first), "x-request-id": "pinned"},
    )
    time.sleep(0.1)
    assert [r.outcome for r in dep.request_ledger if r.attempt_id == "pinned"] == [None]
    assert admin(client, base0, "continue_generation") == {"status": "ok"}
    held.join(5)
    dep.clear_request_ledger()
    for _ in range(4):
        native(client, dep, None)
    assert {r.worker_instance_id for r in dep.request_ledger} == {first, second}


def test_release_and_resume_memory(client: httpx.Client) -> None:
    with FakeDeployment("sglang", workers=1) as dep:
        base = dep.workers[0]["system_url"]
        assert admin(client, base, "release_memory_occupation") == {
            "status": "ok",
            "message": "Memory released",
        }
        assert admin(client, base, "release_memory_occupation")["message"] == (
            "Memory already released"
        )
        waiting = background(
            client,
            f"{dep.frontend_url}/v1/completions",
            {"model": "toy", "prompt": PROMPT, "max_tokens": 2},
            {"x-request-id": "waits"},
        )
        time.sleep(0.1)
        (record,) = dep.request_ledger
        assert record.outcome is None and record.worker_instance_id is None  # no worker yet
        assert admin(client, base, "resume_memory_occupation", {"tags": ["weights"]}) == {
            "status": "ok",
            "message": "Memory resumed for tags: ['weights']",
        }
        waiting.join(5)
        assert dep.request_ledger[0].outcome == "completed"


def test_clear_kv_blocks_on_control_port(client: httpx.Client, dep: FakeDeployment) -> None:
    first = dep.workers[0]["instance_id"]
    long_prompt = list(range(300, 340))
    body = {"input_ids": long_prompt, "stream": True, "sampling_params": {"max_new_tokens": 1}}
    url = f"{dep.frontend_url}/generate"
    client.post(url, json=body, headers={PIN: str(first)})
    cached = stream_chunks(parse_sse(client.post(url, json=body, headers={PIN: str(first)}).text))
    assert cached[-1]["meta_info"]["cached_tokens"] == 32
    clear = f"{dep.control_url}/workers/{first}/clear_kv_blocks"
    assert client.post(clear).json() == {"status": "ok"}
    fresh = stream_chunks(parse_sse(client.post(url, json=body, headers={PIN: str(first)}).text))
    assert fresh[-1]["meta_info"]["cached_tokens"] == 0
    slow = background(
        client,
        url,
        {"input_ids": PROMPT, "stream": True, "sampling_params": {"max_new_tokens": 5}},
        {PIN: str(first), "x-fake-token-delay-ms": "30"},
    )
    wait_for(lambda: any(r.outcome is None for r in dep.request_ledger))
    assert client.post(clear).json() == {
        "status": "error",
        "message": "cannot clear KV blocks while requests are active",
    }
    slow.join(5)
    missing = client.post(f"{dep.control_url}/workers/12/clear_kv_blocks")
    assert missing.status_code == 404 and missing.json()["status"] == "error"


def test_allowlisted_engine_routes(client: httpx.Client) -> None:
    routes = [
        "server_info=get_server_info",
        "flush_cache",
        "pause_generation:tm",
        "admin/version=get_weight_version:tm",
        "admin/group=init_weights_update_group",
    ]
    with FakeDeployment("sglang", workers=1, engine_routes=routes) as dep:
        base = dep.workers[0]["system_url"]
        info = admin(client, base, "server_info")
        assert info["model_path"] == "toy" and info["weight_version"] == "default"
        assert admin(client, base, "flush_cache") == {"success": True}
        assert admin(client, base, "admin/version") == {"result": "default"}
        assert admin(client, base, "admin/group", {"group_name": "g"}) == {
            "success": True,
            "message": "Succeeded to initialize custom process group.",
        }
        assert admin(client, base, "pause_generation", {"mode": "retract"}) == {"status": "ok"}
        assert admin(client, base, "continue_generation") == {"status": "ok"}  # default route
        assert client.post(f"{base}/engine/get_server_info").status_code == 404
        bad = client.post(f"{base}/engine/server_info", json="x")
        assert bad.status_code == 500
        assert json.loads(bad.text)["message"] == "/engine/server_info requires a JSON object body"


@pytest.mark.parametrize(
    ("descriptor", "reason"),
    [
        ("=method", "both the route path and method are required"),
        ("route=", "both the route path and method are required"),
        ("route=one=two", "expected at most one '=' method separator"),
        ("route:tm:engine", "expected at most one ':' target separator"),
        ("route:worker", "unknown target 'worker'; expected 'engine' or 'tm'"),
        ("/route=flush_cache", "non-empty '/'-separated segments"),
        ("route/=flush_cache", "non-empty '/'-separated segments"),
        ("route=bad-method", "method 'bad-method' is not a Python identifier"),
        ("route=_private", "private methods cannot be exposed"),
    ],
)
def test_descriptor_errors(descriptor: str, reason: str) -> None:
    with pytest.raises(ValueError, match="Invalid SGLang engine route descriptor") as info:
        FakeDeployment("sglang", engine_routes=[descriptor])
    assert repr(descriptor) in str(info.value) and reason in str(info.value)


def test_descriptor_grammar() -> None:
    assert parse_engine_routes("server_info=get_server_info  pause_generation:tm") == [
        EngineRouteDescriptor("server_info", "get_server_info", "engine"),
        EngineRouteDescriptor("pause_generation", "pause_generation", "tm"),
    ]
    assert parse_engine_routes("") == [] and parse_engine_routes(None) == []
    with pytest.raises(ValueError, match="configured more than once"):
        parse_engine_routes("flush_cache flush_cache:tm")
    with pytest.raises(ValueError, match="at position 2: descriptor is empty"):
        parse_engine_routes(["flush_cache", " "])
    with pytest.raises(ValueError, match="engine target has no method 'nope'"):
        FakeDeployment("sglang", engine_routes=["x=nope"])
    with pytest.raises(ValueError, match="engine target has no method 'pause_generation'"):
        FakeDeployment("sglang", engine_routes=["pause_generation"])  # a tm-only method
    with pytest.raises(ValueError, match="collides with a built-in route"):
        FakeDeployment(
            "sglang", engine_routes=["control/update_weights_from_disk=update_weights_from_disk"]
        )
    with pytest.raises(ValueError, match="needs backend sglang"):
        FakeDeployment("vllm", engine_routes=["flush_cache"])


def test_engine_routes_from_environment(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DYN_SGLANG_ENGINE_ROUTES", "info=get_server_info")
    with FakeDeployment("sglang", workers=1) as dep:
        assert admin(client, dep.workers[0]["system_url"], "info")["served_model_name"] == "toy"
    monkeypatch.setenv("DYN_SGLANG_ENGINE_ROUTES", "info=")
    with pytest.raises(ValueError, match="'info='"):
        FakeDeployment("sglang")
    with FakeDeployment("sglang", workers=1, engine_routes=[]) as dep:  # explicit: env unused
        assert client.post(f"{dep.workers[0]['system_url']}/engine/info").status_code == 404


def test_other_update_routes(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    before = native(client, dep, 0)["output_ids"]
    tensor = {"serialized_named_tensors": ["AAAA"], "weight_version": "t1"}
    assert admin(client, base, "control/update_weights_from_tensor", tensor) == {
        "success": True,
        "message": "Succeeded to update model weights.",
    }
    after_tensor = native(client, dep, 0)
    assert after_tensor["output_ids"] != before
    assert after_tensor["meta_info"]["weight_version"] == "t1"
    distributed = {"names": ["w"], "dtypes": ["bf16"], "shapes": [[2]], "flush_cache": False}
    assert admin(client, base, "control/update_weights_from_distributed", distributed) == {
        "success": True,
        "message": "Succeeded to update parameter online.",
    }
    after_distributed = native(client, dep, 0)
    assert after_distributed["output_ids"] != after_tensor["output_ids"]
    assert after_distributed["meta_info"]["weight_version"] == "t1"  # no version: kept
    ipc = {"zmq_handles": {"a": "ipc:///tmp/x"}}
    assert admin(client, base, "control/update_weights_from_ipc", ipc)["success"] is True


def test_update_while_paused_does_not_wait(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    frozen = background(
        client,
        f"{dep.frontend_url}/generate",
        {"input_ids": PROMPT, "stream": True, "sampling_params": {"max_new_tokens": 8}},
        {PIN: str(dep.workers[0]["instance_id"]), "x-fake-token-delay-ms": "20"},
    )
    wait_for(lambda: any(r.tokens_generated for r in dep.request_ledger))
    assert admin(client, base, "pause_generation", {"mode": "in_place"}) == {"status": "ok"}
    started = time.monotonic()
    reply = admin(client, base, "control/update_weights_from_disk", {"model_path": "/ckpt/9"})
    assert reply["success"] is True and time.monotonic() - started < 0.5
    assert dep.request_ledger[0].outcome is None  # still frozen, not drained
    admin(client, base, "continue_generation")
    frozen.join(5)
    assert dep.request_ledger[0].outcome == "completed"
