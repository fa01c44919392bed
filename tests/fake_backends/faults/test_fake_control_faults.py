"""Every control-plane fault manifests: each test shows the faulty and the clean behaviour.

The ``@shows`` registry is shared with ``test_fake_faults``, whose completeness check
imports this module.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_backend_helpers import (
    LONG_PROMPT,
    PROMPT,
    admin,
    faulted,
    greedy,
    ids,
    parse_sse,
    rl_workers,
    shows,
    wait_for,
    zero,
)

from fake_backends.deployment.assembly import FakeDeployment

# -- worker administration ---------------------------------------------------------------


@shows("admin_http200_failure_body")
def test_admin_http200_failure_body(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    before = ids(greedy(client, dep))
    admin(client, base, "pause_generation")
    with faulted(dep, "admin_http200_failure_body"):
        reply = client.post(
            f"{base}/engine/update_weights_from_disk",
            json={"model_path": "/ckpt", "weight_version": "v1"},
        )
    assert reply.status_code == 200 and reply.json()["status"] == "error"
    assert admin(client, base, "get_weight_version")["version"] is None
    admin(client, base, "resume_generation")
    assert ids(greedy(client, dep)) == before  # nothing was loaded
    with FakeDeployment("sglang", workers=1, faults=["admin_http200_failure_body"]) as sg:
        failed = admin(
            client,
            sg.workers[0]["system_url"],
            "control/update_weights_from_disk",
            {"model_path": "/c"},
        )
        assert failed["success"] is False and failed["num_paused_requests"] == 0


@shows("pause_not_applied")
def test_pause_not_applied(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    with faulted(dep, "pause_not_applied"):
        assert admin(client, base, "pause_generation", {"mode": "keep"})["status"] == "ok"
        started = time.monotonic()
        served = greedy(client, dep)  # would be held until resume on a correct worker
        assert served["choices"][0]["finish_reason"] == "length"
        assert time.monotonic() - started < 1.0
        # The update route still believes the pause.
        assert (
            admin(client, base, "update_weights_from_disk", {"model_path": "/c"})["status"] == "ok"
        )
    admin(client, base, "resume_generation")


@shows("pause_reaches_first_worker_only")
def test_pause_reaches_first_worker_only(client: httpx.Client, dep: FakeDeployment) -> None:
    bases = [worker["system_url"] for worker in dep.workers]
    assert len(bases) == 2
    with faulted(dep, "pause_reaches_first_worker_only"):
        for base in bases:
            assert admin(client, base, "pause_generation", {"mode": "keep"})["status"] == "ok"
        started = time.monotonic()
        served = greedy(client, dep, index=1)  # the second worker was never really paused
        assert served["choices"][0]["finish_reason"] == "length"
        assert time.monotonic() - started < 1.0
        with pytest.raises(httpx.ReadTimeout):  # the first one holds it
            greedy_within(client, dep, 0, timeout=0.5)
    for base in bases:
        admin(client, base, "resume_generation")


def greedy_within(client: httpx.Client, dep: FakeDeployment, index: int, timeout: float) -> Any:
    nvext = {"backend_instance_id": dep.workers[index]["instance_id"]}
    body = {"model": "toy", "prompt": PROMPT, "max_tokens": 4, "temperature": 0, "nvext": nvext}
    return client.post(f"{dep.frontend_url}/v1/completions", json=body, timeout=timeout)


@shows("kv_not_flushed")
def test_kv_not_flushed(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]

    def cached() -> int:
        usage = greedy(client, dep, prompt=LONG_PROMPT)["usage"]
        value: int = usage["prompt_tokens_details"]["cached_tokens"]
        return value

    cached()
    with faulted(dep, "kv_not_flushed"):
        assert admin(client, base, "flush_cache") == {"status": "ok", "message": "Cache flushed"}
        assert cached() == 32
    admin(client, base, "flush_cache")
    assert cached() == 0


@shows("unknown_route_200")
def test_unknown_route_200(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    missing = {"error": "Route not found", "message": "Route /engine/no_such_route not found"}
    for deployment in (vllm, sglang):
        base = deployment.workers[0]["system_url"]
        clean = client.post(f"{base}/engine/no_such_route", json={})
        assert clean.status_code == 404 and json.loads(clean.text) == missing
        with faulted(deployment, "unknown_route_200"):
            faulty = client.post(f"{base}/engine/no_such_route", json={})
        assert faulty.status_code == 200 and json.loads(faulty.text) == {"status": "ok"}
        assert faulty.headers["content-type"] == "text/plain; charset=utf-8"
    with faulted(vllm, "unknown_route_200"):  # known routes answer as before
        flushed = admin(client, vllm.workers[0]["system_url"], "flush_cache")
    assert flushed == {"status": "ok", "message": "Cache flushed"}


# -- discovery ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet() -> Iterator[FakeDeployment]:
    with FakeDeployment(
        "vllm", workers=3, worker_namespaces=["ns", "ns-1a2b", "ns2"], listener_env={}
    ) as deployment:
        yield deployment


@shows("namespace_prefix_matches_ns2")
def test_namespace_prefix_matches_ns2(client: httpx.Client, fleet: FakeDeployment) -> None:
    fleet.set_listener_env({"DYN_NAMESPACE_PREFIX": "ns"})
    clean = [w["namespace"] for w in rl_workers(client, fleet)["workers"]]
    with faulted(fleet, "namespace_prefix_matches_ns2"):
        faulty = [w["namespace"] for w in rl_workers(client, fleet)["workers"]]
    assert clean == ["ns", "ns-1a2b"] and faulty == ["ns", "ns-1a2b", "ns2"]


@shows("empty_prefix_global")
def test_empty_prefix_global(client: httpx.Client, fleet: FakeDeployment) -> None:
    fleet.set_listener_env({"DYN_NAMESPACE_PREFIX": "", "DYN_NAMESPACE": "ns"})
    assert [w["namespace"] for w in rl_workers(client, fleet)["workers"]] == ["ns"]
    with faulted(fleet, "empty_prefix_global"):
        body = rl_workers(client, fleet)
    assert body["namespace"] == "dynamo" and len(body["workers"]) == 3


@shows("system_url_absent", "routes_renamed", "required_route_missing")
def test_worker_zero_admin_faults(client: httpx.Client, dep: FakeDeployment) -> None:
    clean = zero(client, dep)
    assert "system_url" in clean and "update_weights_from_disk" in clean["routes"]
    with faulted(dep, "system_url_absent"):
        assert "system_url" not in zero(client, dep)
        others = [
            w
            for w in rl_workers(client, dep)["workers"]
            if w["instance_id"] != dep.workers[0]["instance_id"]
        ]
        assert others and all("system_url" in w for w in others)
    with faulted(dep, "routes_renamed"):
        renamed = zero(client, dep)["routes"]
    assert renamed == [f"engine/{r}" for r in clean["routes"]]
    base = clean["system_url"]
    assert client.post(f"{base}/engine/{renamed[0]}").status_code == 404  # as advertised: broken
    assert client.post(f"{base}/engine/{clean['routes'][0]}", json={}).status_code == 200
    with faulted(dep, "required_route_missing"):
        missing = zero(client, dep)["routes"]
    assert set(clean["routes"]) - set(missing) == {"update_weights_from_disk"}
    served = admin(client, base, "update_weights_from_disk", {"model_path": "/c"})
    assert served["status"] == "error" and "paused" in served["message"]  # still served


@shows("rl_listener_on_frontend")
def test_rl_listener_on_frontend(client: httpx.Client, vllm: FakeDeployment) -> None:
    url = f"{vllm.frontend_url}/v1/rl/workers"
    clean = client.get(url)
    assert clean.status_code == 404
    assert clean.json()["message"] == "Route not found: GET /v1/rl/workers"
    with faulted(vllm, "rl_listener_on_frontend"):
        leaked = client.get(url)
        listener = rl_workers(client, vllm)
        posted = client.post(url, json={})
    assert leaked.status_code == 200 and leaked.headers["content-type"] == "application/json"
    assert leaked.json() == listener and len(listener["workers"]) == 2
    assert posted.status_code == 404  # only GET leaks


# -- requests and telemetry -----------------------------------------------------------------


def _walk_away(client: httpx.Client, dep: FakeDeployment, attempt: str) -> None:
    body = {"model": "toy", "prompt": PROMPT, "max_tokens": 60, "ignore_eos": True, "stream": True}
    headers = {"x-request-id": attempt, "x-fake-token-delay-ms": "2"}
    url = f"{dep.frontend_url}/v1/completions"
    with client.stream("POST", url, json=body, headers=headers) as reply:
        next(reply.iter_lines())


@shows("cancellation_not_propagated")
def test_cancellation_not_propagated(client: httpx.Client, dep: FakeDeployment) -> None:
    def record(attempt: str) -> Any:
        return next(r for r in dep.request_ledger if r.attempt_id == attempt)

    _walk_away(client, dep, "clean")
    wait_for(lambda: record("clean").outcome is not None)
    assert record("clean").outcome == "cancelled" and record("clean").tokens_generated < 60
    with faulted(dep, "cancellation_not_propagated"):
        _walk_away(client, dep, "ignored")
        wait_for(lambda: record("ignored").outcome is not None)
    assert record("ignored").outcome == "completed" and record("ignored").tokens_generated == 60


def _timed_out_then_retried(client: httpx.Client, dep: FakeDeployment, attempt: str) -> Any:
    body = {
        "model": "toy",
        "prompt": PROMPT,
        "max_tokens": 6,
        "temperature": 1.0,
        "ignore_eos": True,
    }
    url = f"{dep.frontend_url}/v1/completions"
    slow = {"x-request-id": attempt, "x-fake-delay-ms": "300"}
    with pytest.raises(httpx.ReadTimeout):
        client.post(url, json=body, headers=slow, timeout=0.1)
    retry = client.post(url, json=body, headers={"x-request-id": attempt})
    assert retry.status_code == 200
    wait_for(lambda: all(r.outcome for r in dep.request_ledger if r.attempt_id == attempt))
    return retry.json()


@shows("late_response_delivered_twice")
def test_late_response_delivered_twice(client: httpx.Client, dep: FakeDeployment) -> None:
    clean = _timed_out_then_retried(client, dep, "clean")
    first, second = [r for r in dep.request_ledger if r.attempt_id == "clean"]
    assert (first.outcome, second.outcome) == ("cancelled", "completed")
    assert clean["id"] == second.response_id != first.response_id
    with faulted(dep, "late_response_delivered_twice"):
        late = _timed_out_then_retried(client, dep, "dup")
    first, second = [r for r in dep.request_ledger if r.attempt_id == "dup"]
    assert (first.outcome, second.outcome) == ("completed", "completed")
    assert late["id"] == first.response_id != second.response_id  # the first one's answer


@shows("metrics_high_cardinality")
def test_metrics_high_cardinality(client: httpx.Client, dep: FakeDeployment) -> None:
    url = f"{dep.frontend_url}/v1/completions"
    client.post(
        url,
        json={"model": "toy", "prompt": PROMPT, "max_tokens": 1},
        headers={"x-request-id": "plain"},
    )
    assert "request_id=" not in client.get(f"{dep.frontend_url}/metrics").text
    with faulted(dep, "metrics_high_cardinality"):
        for i in range(3):
            client.post(
                url,
                json={"model": "toy", "prompt": PROMPT, "max_tokens": 1},
                headers={"x-request-id": f"r{i}"},
            )
    text = client.get(f"{dep.frontend_url}/metrics").text
    for i in range(3):
        assert f'request_id="r{i}"' in text


def _pause_reply(client: httpx.Client, base: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = client.post(f"{base}/engine/pause_generation", json=body)
    assert reply.status_code == 200
    return dict(json.loads(reply.text))


@shows("invalid_pause_mode_accepted", "invalid_pause_mode_pauses")
def test_invalid_pause_modes(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    refused = _pause_reply(client, base, {"mode": "drain"})
    assert refused["message"] == "Invalid mode 'drain'; expected keep|wait|abort"
    assert greedy(client, dep)["choices"][0]["finish_reason"] == "length"  # not paused
    with faulted(dep, "invalid_pause_mode_accepted"):
        assert _pause_reply(client, base, {"mode": "drain"})["mode"] == "keep"
    admin(client, base, "resume_generation")
    with faulted(dep, "invalid_pause_mode_pauses"):
        assert _pause_reply(client, base, {"mode": "drain"})["status"] == "error"
        with pytest.raises(httpx.ReadTimeout):  # held: the refusal paused the worker anyway
            client.post(
                f"{dep.frontend_url}/v1/completions",
                json={"model": dep.model, "prompt": PROMPT, "max_tokens": 2},
                timeout=0.5,
            )
    admin(client, base, "resume_generation")


@shows("sglang_invalid_pause_mode_crashes")
def test_an_invalid_sglang_pause_mode_answers_ok_then_the_worker_dies(client: httpx.Client) -> None:
    with FakeDeployment("sglang", workers=1) as clean:
        base = clean.workers[0]["system_url"]
        refused = _pause_reply(client, base, {"mode": "drain"})
        assert refused["success"] is False and "drain" in refused["message"]
        assert client.get(f"{base}/health").status_code == 200
    with FakeDeployment("sglang", workers=1, faults=["sglang_invalid_pause_mode_crashes"]) as sg:
        base = sg.workers[0]["system_url"]
        assert _pause_reply(client, base, {"mode": "drain"}) == {"status": "ok"}
        with pytest.raises(httpx.ReadTimeout):  # the process is gone: nothing answers
            client.get(f"{base}/health", timeout=0.5)


@shows("sglang_second_pause_fails")
def test_a_second_sglang_pause_fails_with_the_real_workers_500(client: httpx.Client) -> None:
    for faults, second in (([], 200), (["sglang_second_pause_fails"], 500)):
        with FakeDeployment("sglang", workers=1, faults=faults) as sg:
            base = sg.workers[0]["system_url"]
            pause = f"{base}/engine/pause_generation"
            assert client.post(pause, json={"mode": "in_place"}).status_code == 200
            answer = client.post(pause, json={"mode": "in_place"})
            assert answer.status_code == second
            if second == 500:
                assert "Unable to unregister endpoint instance" in answer.json()["message"]
            assert client.post(f"{base}/engine/continue_generation", json={}).status_code == 200


@shows("second_pause_hangs")
def test_second_pause_hangs(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    admin(client, base, "pause_generation", {"mode": "keep"})
    assert admin(client, base, "pause_generation", {"mode": "keep"})["status"] == "ok"
    with faulted(dep, "second_pause_hangs"), pytest.raises(httpx.ReadTimeout):
        client.post(f"{base}/engine/pause_generation", json={"mode": "keep"}, timeout=0.5)
    admin(client, base, "resume_generation")  # releases the hung pause, which pauses again
    time.sleep(0.2)
    admin(client, base, "resume_generation")
    assert greedy(client, dep)["choices"][0]["finish_reason"] == "length"


@shows("unpaused_update_applied")
def test_unpaused_update_applied(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    update = {"model_path": "/c", "weight_version": "v-unpaused"}
    refused = client.post(f"{base}/engine/update_weights_from_disk", json=update)
    assert json.loads(refused.text)["status"] == "error"
    with faulted(dep, "unpaused_update_applied"):
        assert admin(client, base, "update_weights_from_disk", update)["status"] == "ok"
    assert admin(client, base, "get_weight_version")["version"] == "v-unpaused"


def generate_instances(client: httpx.Client, dep: FakeDeployment) -> list[int]:
    health = client.get(f"{dep.frontend_url}/health").json()
    return [i["instance_id"] for i in health["instances"] if i["endpoint"] == "generate"]


@shows("stopped_worker_listed")
def test_stopped_worker_listed(client: httpx.Client) -> None:
    """A paused or released SGLang worker leaves the frontend's /health (as Dynamo's SGLang worker
    unregisters), TensorRT-LLM's released worker too; under the fault it stays listed."""
    with FakeDeployment("sglang", workers=2) as dep:
        base = dep.workers[0]["system_url"]
        stopped = dep.workers[0]["instance_id"]
        assert stopped in generate_instances(client, dep)
        for stop, restore in (
            ("pause_generation", "continue_generation"),
            ("release_memory_occupation", "resume_memory_occupation"),
        ):
            admin(client, base, stop)
            assert generate_instances(client, dep) == [dep.workers[1]["instance_id"]]
            with faulted(dep, "stopped_worker_listed"):
                assert stopped in generate_instances(client, dep)
            admin(client, base, restore)
            assert stopped in generate_instances(client, dep)
    with FakeDeployment("trtllm", workers=1) as dep:
        base = dep.workers[0]["system_url"]
        reply = admin(client, base, "control/release_memory_occupation")
        assert reply == {"status": "ok", "message": "Memory released"}
        assert generate_instances(client, dep) == []
        assert admin(client, base, "control/release_memory_occupation")["message"] == (
            "Memory already released"
        )
        admin(client, base, "control/resume_memory_occupation")
        assert generate_instances(client, dep) == [dep.workers[0]["instance_id"]]


def _aborted_stream(client: httpx.Client, dep: FakeDeployment) -> list[Any]:
    """A stream held by a pause (keep), then aborted by a pause in abort mode: its events."""
    base = dep.workers[0]["system_url"]
    pinned = {"x-dynamo-worker-instance-id": str(dep.workers[0]["instance_id"])}
    body = {"model": dep.model, "prompt": PROMPT, "max_tokens": 8, "stream": True}
    admin(client, base, "pause_generation", {"mode": "keep"})
    with client.stream(
        "POST", f"{dep.frontend_url}/v1/completions", json=body, headers=pinned
    ) as reply:
        wait_for(lambda: dep.state.workers[0].runtime.has_requests())
        admin(client, base, "pause_generation", {"mode": "abort"})
        text = "".join(reply.iter_text())
    admin(client, base, "resume_generation")
    return parse_sse(text)


@shows("abort_orphans_streams")
def test_abort_orphans_streams(client: httpx.Client, dep: FakeDeployment) -> None:
    clean = _aborted_stream(client, dep)
    assert clean[-1] == "[DONE]" and clean[-2]["choices"][0]["finish_reason"] is not None
    with faulted(dep, "abort_orphans_streams"):
        assert _aborted_stream(client, dep) == []


@shows("departed_worker_listed")
def test_departed_worker_listed(client: httpx.Client) -> None:
    """A worker whose process went away is listed as Dynamo lists it (no routes, an `error`,
    no system_url) and leaves /health; under the fault it looks healthy."""
    with FakeDeployment("vllm") as dep:
        gone = dep.workers[-1]["instance_id"]

        def entry() -> dict[str, Any]:
            workers = rl_workers(client, dep)["workers"]
            return next(w for w in workers if w["instance_id"] == gone)

        control = f"{dep.control_url}/departure"
        assert client.post(control, json={"departed": True}).json()["instance_id"] == gone
        assert entry()["routes"] == [] and entry()["error"].startswith("Unavailable: TCP")
        assert "system_url" not in entry() and gone not in generate_instances(client, dep)
        with faulted(dep, "departed_worker_listed"):
            assert entry()["routes"] and "error" not in entry()
        client.post(control, json={"departed": False})
        assert entry()["routes"] and gone in generate_instances(client, dep)
