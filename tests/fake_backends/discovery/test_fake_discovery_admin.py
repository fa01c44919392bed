"""RL discovery listener, frontend info routes, and the worker system servers."""

from __future__ import annotations

import json

import httpx
from fake_backend_helpers import rl_workers

from fake_backends.deployment.assembly import FakeDeployment

VLLM_ROUTES = [
    "abort_request",
    "destroy_weights_update_group",
    "flush_cache",
    "get_weight_version",
    "init_weights_update_group",
    "liveness_probe",
    "pause_generation",
    "resume_generation",
    "set_weight_version",
    "update_weights_from_disk",
    "update_weights_from_distributed",
    "update_weights_from_tensor",
]
REQUIRED = ["namespace", "component", "endpoint", "instance_id", "transport", "request_plane_url"]


def test_vllm_workers_listing(client: httpx.Client, vllm: FakeDeployment) -> None:
    raw = client.get(f"{vllm.rl_url}/v1/rl/workers")
    assert raw.headers["content-type"] == "application/json"
    body = rl_workers(client, vllm)
    assert body["protocol_version"] == 1 and body["namespace"] == "dynamo"
    workers = body["workers"]
    assert len(workers) == 2
    keys = [(w["namespace"], w["component"], w["endpoint"], w["instance_id"]) for w in workers]
    assert keys == sorted(keys) and len(set(keys)) == 2
    for worker in workers:
        assert [k for k in worker if k in REQUIRED] == REQUIRED
        assert (
            worker["endpoint"] == "rl" and worker["request_plane_url"] == "dyn://dynamo.backend.rl"
        )
        assert list(worker["transport"]) == ["tcp"] and worker["transport"]["tcp"].endswith(
            "/dynamo/backend/rl"
        )
        assert (
            worker["routes"] == VLLM_ROUTES
            and worker["model"] == "toy"
            and worker["world_size"] == 1
        )
        assert worker["system_url"].startswith("http://127.0.0.1:") and "error" not in worker
        assert None not in worker.values()
    ids = {w["instance_id"] for w in vllm.workers}
    assert {w["instance_id"] for w in workers} == ids
    assert max(ids) > 2**53 and vllm.workers[0]["instance_id"] > 2**53
    assert str(vllm.workers[0]["instance_id"]) in raw.text  # exact integer in the JSON text


def test_other_backends_list_no_workers(
    client: httpx.Client, sglang: FakeDeployment, trtllm: FakeDeployment
) -> None:
    for dep in (sglang, trtllm):
        assert rl_workers(client, dep) == {
            "protocol_version": 1,
            "namespace": "dynamo",
            "workers": [],
        }
    # Both have system servers (handed out by the deployment); TRT-LLM's serve only the two
    # memory routes.
    assert all(w["system_url"].startswith("http://127.0.0.1:") for w in sglang.workers)
    for worker in trtllm.workers:
        assert client.get(f"{worker['system_url']}/health").status_code == 200
        assert client.post(f"{worker['system_url']}/engine/pause_generation").status_code == 404


def test_worker_metrics_name_the_worker_and_count_its_generations(
    client: httpx.Client, trtllm: FakeDeployment
) -> None:
    """The series and labels of the real 1.6.1 worker system server (fixtures/dynamo-1.6.1/
    toy-worker/worker_metrics_after_cancel.json): worker_id is the instance id in hex."""
    worker = trtllm.workers[0]
    text = client.get(f"{worker['system_url']}/metrics").text
    labels = (
        'dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",'
        f'worker_id="{worker["instance_id"]:x}"'
    )
    assert f"dynamo_component_requests_total{{{labels}}}" in text

    def value(name: str) -> float:
        lines = client.get(f"{worker['system_url']}/metrics").text.splitlines()
        (line,) = [line for line in lines if line.startswith(f"{name}{{{labels}}} ")]
        return float(line.rsplit(" ", 1)[1])

    requests = value("dynamo_component_requests_total")
    body = {"model": "toy", "prompt": [500, 600], "max_tokens": 2}
    pinned = {"x-dynamo-worker-instance-id": str(worker["instance_id"])}
    assert client.post(
        f"{trtllm.frontend_url}/v1/completions", json=body, headers=pinned
    ).is_success
    assert value("dynamo_component_requests_total") == requests + 1
    assert value("dynamo_component_inflight_requests") == 0


def test_listener_serves_nothing_else(client: httpx.Client, vllm: FakeDeployment) -> None:
    for method in ("POST", "PUT", "DELETE"):
        r = client.request(method, f"{vllm.rl_url}/v1/rl/workers")
        assert r.status_code == 405 and r.content == b""
    for path in ("/v1/rl/engine", "/v1/rl/engines", "/", "/v1/models"):
        r = client.get(vllm.rl_url + path)
        assert r.status_code == 404 and r.content == b""


def test_frontend_info_routes(client: httpx.Client, any_backend: FakeDeployment) -> None:
    base = any_backend.frontend_url
    models = client.get(f"{base}/v1/models").json()
    assert models["object"] == "list"
    (card,) = models["data"]
    assert card["id"] == "toy" and card["object"] == "model" and card["owned_by"] == "nvidia"
    assert card["context_window"] == 4096 and isinstance(card["created"], int)
    health = client.get(f"{base}/health").json()
    assert list(health) == ["status", "endpoints", "instances"] and health["status"] == "healthy"
    endpoints = ["generate", "rl"] if any_backend.backend == "vllm" else ["generate"]
    assert health["endpoints"] == [f"dyn://dynamo.backend.{e}" for e in endpoints]
    assert len(health["instances"]) == 2 * len(endpoints)
    for instance in health["instances"]:
        assert instance["transport"]["tcp"].endswith(f"/dynamo/backend/{instance['endpoint']}")
        assert {"device_type", "request_plane_codec"} <= set(instance)
    assert client.get(f"{base}/live").json() == {"status": "live", "message": "Service is live"}
    counted = client.post(
        f"{base}/v1/responses/input_tokens", json={"model": "toy", "input": "hello world"}
    )
    assert counted.json() == {"object": "response.input_tokens", "input_tokens": 5}  # recorded
    metrics = client.get(f"{base}/metrics")
    assert metrics.headers["content-type"] == "text/plain; charset=utf-8"  # recorded


def test_system_server_health_and_routes(client: httpx.Client, vllm: FakeDeployment) -> None:
    base = vllm.workers[0]["system_url"]
    for path in ("/health", "/live"):
        reply = client.get(base + path)
        assert reply.headers["content-type"] == "text/plain; charset=utf-8"
        health = json.loads(reply.text)
        assert health["status"] == "ready" and set(health["uptime"]) == {"secs", "nanos"}
        assert health["endpoints"] == {"rl": "ready", "generate": "ready"}
    unknown = client.get(f"{base}/nope")
    assert unknown.status_code == 404 and unknown.text == "Route not found"
    assert unknown.headers["content-type"] == "text/plain; charset=utf-8"
    probe = client.post(f"{base}/engine/liveness_probe")
    assert probe.status_code == 200 and probe.headers["content-type"] == "text/plain; charset=utf-8"
    assert json.loads(probe.text) == {"status": "ok", "alive": True}
    assert json.loads(client.get(f"{base}/engine/liveness_probe").text)["alive"] is True
    bad = client.post(f"{base}/engine/liveness_probe", content=b"{oops")
    assert bad.status_code == 400 and json.loads(bad.text)["error"] == "Invalid JSON"
    missing = client.post(f"{base}/engine/no_such_route", json={})
    assert missing.status_code == 404
    assert json.loads(missing.text) == {
        "error": "Route not found",
        "message": "Route /engine/no_such_route not found",
    }
    assert json.loads(client.post(f"{base}/engine/flush_cache", json=[1, 2]).text) == {
        "status": "error",
        "message": "request body must be a JSON object",
    }
    missing_version = client.post(f"{base}/engine/set_weight_version", json={})
    assert json.loads(missing_version.text) == {
        "status": "error",
        "message": "Missing 'weight_version' in body",
    }


def test_weight_version_and_ledger(client: httpx.Client, vllm: FakeDeployment) -> None:
    base = vllm.workers[1]["system_url"]
    instance = vllm.workers[1]["instance_id"]
    start = len(vllm.admin_ledger)
    before = json.loads(client.post(f"{base}/engine/get_weight_version").text)
    assert before == {"status": "ok", "version": None, "version_declared": False}
    worker = vllm.state.workers[1]
    try:
        assert json.loads(
            client.post(f"{base}/engine/set_weight_version", json={"weight_version": "step-7"}).text
        ) == {"status": "ok", "version": "step-7"}
        after = json.loads(client.post(f"{base}/engine/get_weight_version").text)
        assert after == {"status": "ok", "version": "step-7", "version_declared": True}
        engine = client.post(
            f"{vllm.frontend_url}/v1/completions",
            json={
                "model": "toy",
                "prompt": [300, 301],
                "max_tokens": 1,
                "nvext": {"backend_instance_id": instance, "extra_fields": ["engine_data"]},
            },
        ).json()
        assert engine["nvext"]["engine_data"]["weight_version"] == "step-7"
    finally:
        worker.version, worker.version_declared = None, False
    records = vllm.admin_ledger[start:]
    assert [(r.method, r.path) for r in records] == [
        ("POST", "/engine/get_weight_version"),
        ("POST", "/engine/set_weight_version"),
        ("POST", "/engine/get_weight_version"),
    ]
    assert records[0].body == {} and records[1].body == {"weight_version": "step-7"}
    assert all(r.instance_id == instance and r.status == 200 for r in records)
