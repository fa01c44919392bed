"""The native vLLM sidecar's routes on our fake: upstream's names, bodies and replies, a
transfer lifecycle that really changes the weights, and the faults that break them.

Each test starts its own deployment: these tests change worker state.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_backend_helpers import DONE, PROMPT, admin, rl_workers, shows, stream_chunks, wait_for

from fake_backends.deployment.assembly import FakeDeployment

ROUTES = [
    "control/get_weight_version",
    "control/is_paused",
    "control/is_sleeping",
    "control/pause_generation",
    "control/resume_generation",
    "update/finish_weight_update",
    "update/init_weight_transfer_engine",
    "update/model_taints",
    "update/start_weight_update",
    "update/update_weight_version",
    "update/update_weights",
]
INIT = {"init_info": {"master_address": "127.0.0.1", "master_port": 1, "rank_offset": 1}}
LONG_PROMPT = list(range(300, 340))  # 40 tokens: two full 16-token blocks
UPDATE = {"update_info": {"names": ["w"], "dtype_names": ["float32"], "shapes": [[1]]}}


@pytest.fixture
def dep() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", admin_family="sidecar") as deployment:
        yield deployment


def base_of(dep: FakeDeployment, index: int = 0) -> str:
    return str(dep.workers[index]["system_url"])


def greedy(
    client: httpx.Client, dep: FakeDeployment, index: int = 0, prompt: list[int] = PROMPT
) -> dict[str, Any]:
    body = {
        "model": "toy",
        "prompt": prompt,
        "max_tokens": 4,
        "temperature": 0,
        "nvext": {
            "backend_instance_id": dep.workers[index]["instance_id"],
            "extra_fields": ["completion_token_ids", "engine_data"],
        },
    }
    reply = client.post(f"{dep.frontend_url}/v1/completions", json=body)
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()
    return result


def engine(client: httpx.Client, base: str, route: str, body: Any) -> httpx.Response:
    return client.post(f"{base}/engine/{route}", json=body)


class SlowStream:
    """A 20-token stream pinned to worker 0, recording its events as they arrive."""

    def __init__(self, client: httpx.Client, dep: FakeDeployment) -> None:
        self.events: list[Any] = []
        body = {
            "model": "toy",
            "prompt": PROMPT,
            "max_tokens": 20,
            "ignore_eos": True,
            "stream": True,
            "nvext": {"backend_instance_id": dep.workers[0]["instance_id"]},
        }

        def run() -> None:
            url = f"{dep.frontend_url}/v1/completions"
            headers = {"x-fake-token-delay-ms": "20"}
            with client.stream("POST", url, json=body, headers=headers) as reply:
                for line in reply.iter_lines():
                    if line.startswith("data: "):
                        payload = line[len("data: ") :]
                        self.events.append(DONE if payload == DONE else json.loads(payload))

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        wait_for(lambda: len(self.events) >= 2)

    def finished(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def tokens(self) -> int:
        """Tokens streamed: one per chunk with a choice (the last one carries the finish)."""
        return sum(1 for chunk in stream_chunks(self.events) if chunk.get("choices"))


def test_routes_listed_and_python_names_absent(client: httpx.Client, dep: FakeDeployment) -> None:
    listed = rl_workers(client, dep)["workers"]
    assert [w["routes"] for w in listed] == [ROUTES, ROUTES]
    assert all(w["world_size"] == 1 and "admin_base_url" not in w for w in listed)
    assert client.post(f"{base_of(dep)}/engine/pause_generation", json={}).status_code == 404


def test_transfer_lifecycle_changes_weights_and_names_the_version(
    client: httpx.Client, dep: FakeDeployment
) -> None:
    base = base_of(dep)
    before = greedy(client, dep)["nvext"]["completion_token_ids"]
    assert admin(client, base, "control/is_paused") == {"is_paused": False}
    assert admin(client, base, "control/pause_generation", {"mode": "keep"}) == {"status": "paused"}
    assert admin(client, base, "control/is_paused") == {"is_paused": True}
    assert admin(client, base, "update/init_weight_transfer_engine", INIT) == {
        "message": "Weight transfer initialized"
    }
    assert admin(client, base, "update/start_weight_update") == {"message": "Weight update started"}
    assert admin(client, base, "update/update_weights", UPDATE) == {"message": "Weights updated"}
    assert admin(client, base, "update/finish_weight_update", {"weight_version": "v2"}) == {
        "message": "Weight update finished"
    }
    assert admin(client, base, "control/get_weight_version") == {"weight_version": "v2"}
    assert admin(client, base, "control/resume_generation") == {"status": "resumed"}
    after = greedy(client, dep)
    assert after["nvext"]["completion_token_ids"] != before
    assert after["nvext"]["engine_data"]["weight_version"] == "v2"
    assert admin(client, base, "update/update_weight_version", {"new_version": "v3"}) == {
        "success": True,
        "new_version": "v3",
    }
    again = greedy(client, dep)
    assert again["nvext"]["completion_token_ids"] == after["nvext"]["completion_token_ids"]
    assert again["nvext"]["engine_data"]["weight_version"] == "v3"
    assert admin(client, base, "control/is_sleeping") == {"is_sleeping": False}
    assert admin(client, base, "update/model_taints", {"taints": ["b", "a", "b"]}) == {
        "status": "ok",
        "taints": ["a", "b"],
    }


@pytest.mark.parametrize(
    ("route", "body", "status"),
    [
        ("update/init_weight_transfer_engine", {}, 500),
        ("update/start_weight_update", {}, 500),  # before init
        ("update/update_weight_version", {}, 500),
        ("update/update_weight_version", {"new_version": ""}, 500),
        ("control/pause_generation", {"mode": "sideways"}, 200),
        ("control/pause_generation", [1], 200),
    ],
)
def test_invalid_calls(
    client: httpx.Client, dep: FakeDeployment, route: str, body: Any, status: int
) -> None:
    """Validation before the engine call is a 200 `{"status": "error"}`; a failure inside it is
    Dynamo's 500 `Handler error`."""
    reply = engine(client, base_of(dep), route, body)
    assert reply.status_code == status, reply.text
    parsed = json.loads(reply.text)
    if status == 500:
        assert parsed["error"] == "Handler error" and parsed["message"]
    else:
        assert parsed["status"] == "error" and parsed["message"]
    assert admin(client, base_of(dep), "control/is_paused") == {"is_paused": False}


def test_update_info_must_be_an_object_within_an_update(
    client: httpx.Client, dep: FakeDeployment
) -> None:
    base = base_of(dep)
    admin(client, base, "update/init_weight_transfer_engine", INIT)
    assert engine(client, base, "update/update_weights", UPDATE).status_code == 500  # not started
    admin(client, base, "update/start_weight_update")
    listed = {"update_info": [UPDATE["update_info"]]}
    assert engine(client, base, "update/update_weights", listed).status_code == 500


def test_pause_defaults_to_abort(client: httpx.Client, dep: FakeDeployment) -> None:
    stream = SlowStream(client, dep)
    assert admin(client, base_of(dep), "control/pause_generation") == {"status": "paused"}
    assert stream.finished(1.0), "the in-flight stream was not aborted by a pause without a mode"
    assert stream.tokens() < 20
    admin(client, base_of(dep), "control/resume_generation")


@shows("sidecar_pause_default_keep")
def test_fault_pause_default_keep(client: httpx.Client) -> None:
    with FakeDeployment(
        "vllm", admin_family="sidecar", faults=["sidecar_pause_default_keep"]
    ) as dep:
        stream = SlowStream(client, dep)
        admin(client, base_of(dep), "control/pause_generation")
        assert not stream.finished(0.3), "kept in place until resume"
        admin(client, base_of(dep), "control/resume_generation")
        assert stream.finished(3.0) and stream.tokens() == 20


def test_pause_clear_cache_invalidates_prefixes(client: httpx.Client, dep: FakeDeployment) -> None:
    def cached() -> int:
        reply = greedy(client, dep, prompt=LONG_PROMPT)
        return int(reply["usage"]["prompt_tokens_details"]["cached_tokens"])

    cached()
    assert cached() > 0
    admin(client, base_of(dep), "control/pause_generation", {"mode": "keep", "clear_cache": True})
    admin(client, base_of(dep), "control/resume_generation")
    assert cached() > 0, "keep mode ignores clear_cache, as vLLM does"
    admin(client, base_of(dep), "control/pause_generation", {"mode": "wait", "clear_cache": True})
    admin(client, base_of(dep), "control/resume_generation")
    assert cached() == 0


@shows("sidecar_status_words")
def test_fault_status_words(client: httpx.Client) -> None:
    with FakeDeployment("vllm", admin_family="sidecar", faults=["sidecar_status_words"]) as dep:
        assert admin(client, base_of(dep), "control/pause_generation") == {"status": "ok"}
        assert admin(client, base_of(dep), "control/resume_generation") == {"status": "ok"}


@shows("sidecar_partial_transfer_routes")
def test_fault_partial_transfer_routes(client: httpx.Client) -> None:
    faults = ["sidecar_partial_transfer_routes"]
    with FakeDeployment("vllm", admin_family="sidecar", faults=faults) as dep:
        listed = {w["instance_id"]: w["routes"] for w in rl_workers(client, dep)["workers"]}
        first = listed[dep.workers[0]["instance_id"]]
        assert "update/finish_weight_update" not in first
        assert "update/start_weight_update" in first
        assert listed[dep.workers[1]["instance_id"]] == ROUTES
        assert engine(client, base_of(dep), "update/finish_weight_update", {}).status_code == 500


@shows("admin_http200_failure_body")
def test_fault_finish_reports_failure_in_its_body(client: httpx.Client) -> None:
    with FakeDeployment(
        "vllm", admin_family="sidecar", faults=["admin_http200_failure_body"]
    ) as dep:
        base = base_of(dep)
        before = greedy(client, dep)["nvext"]["completion_token_ids"]
        admin(client, base, "update/init_weight_transfer_engine", INIT)
        admin(client, base, "update/start_weight_update")
        admin(client, base, "update/update_weights", UPDATE)
        reply = admin(client, base, "update/finish_weight_update", {"weight_version": "v2"})
        assert reply["status"] == "error"
        assert greedy(client, dep)["nvext"]["completion_token_ids"] == before


def test_pause_unregisters_the_worker_until_resume(client: httpx.Client) -> None:
    """As recorded from the real sidecar (`vllm-sidecar/completion_while_paused.json`,
    `models_while_paused.json`, `pause_while_paused.json`): a paused worker's generate endpoint
    leaves discovery at once; with no other worker the model is unlisted and requests get 503
    immediately, streams too; a second pause fails before reaching the engine."""
    with FakeDeployment("vllm", admin_family="sidecar", workers=1) as dep:
        base = base_of(dep)
        models = f"{dep.frontend_url}/v1/models"
        body = {"model": "toy", "prompt": PROMPT, "max_tokens": 2}
        assert admin(client, base, "control/pause_generation", {"mode": "keep"}) == {
            "status": "paused"
        }
        assert client.get(models).json()["data"] == []
        refused = client.post(f"{dep.frontend_url}/v1/completions", json=body, timeout=2)
        assert refused.status_code == 503
        assert refused.json()["message"].startswith("Model `toy` is not ready")
        streamed = client.post(
            f"{dep.frontend_url}/v1/completions", json={**body, "stream": True}, timeout=2
        )
        assert streamed.status_code == 503
        second = admin(client, base, "control/pause_generation", {"mode": "keep"})
        assert second["status"] == "error" and "failed to unregister endpoint" in second["message"]
        assert len(rl_workers(client, dep)["workers"]) == 1, "the RL endpoint stays listed"
        assert admin(client, base, "control/resume_generation") == {"status": "resumed"}
        assert client.get(models).json()["data"][0]["id"] == "toy"
        assert client.post(f"{dep.frontend_url}/v1/completions", json=body).status_code == 200


def test_pinned_to_a_paused_worker_while_another_serves(
    client: httpx.Client, dep: FakeDeployment
) -> None:
    admin(client, base_of(dep), "control/pause_generation", {"mode": "keep"})
    assert client.get(f"{dep.frontend_url}/v1/models").json()["data"], "worker 1 still serves"
    assert greedy(client, dep, 1)["choices"]
    pinned = {
        "model": "toy",
        "prompt": PROMPT,
        "max_tokens": 2,
        "nvext": {"backend_instance_id": dep.workers[0]["instance_id"]},
    }
    assert client.post(f"{dep.frontend_url}/v1/completions", json=pinned).status_code == 503
    admin(client, base_of(dep), "control/resume_generation")
    assert client.post(f"{dep.frontend_url}/v1/completions", json=pinned).status_code == 200


def test_initial_weight_version_is_an_empty_string(
    client: httpx.Client, dep: FakeDeployment
) -> None:
    assert admin(client, base_of(dep), "control/get_weight_version") == {"weight_version": ""}
    reply = engine(client, base_of(dep), "update/start_weight_update", [1])
    assert json.loads(reply.text) == {
        "status": "error",
        "message": "engine update request body must be a JSON object",
    }


RECORDED = Path(__file__).resolve().parents[3] / "fixtures" / "dynamo-1.6.1" / "vllm-sidecar"
# Recorded in this order against one real sidecar; replayed in the same order against the fake.
REPLAYED = [
    "is_paused_initial",
    "get_weight_version_initial",
    "resume_not_paused",
    "pause_no_body",
    "is_paused_after_pause",
    "pause_while_paused",
    "resume",
    "is_paused_after_resume",
    "pause_mode_abort",
    "pause_mode_abort__resume",
    "pause_mode_wait",
    "pause_mode_wait__resume",
    "pause_mode_keep",
    "pause_mode_keep__resume",
    "pause_clear_cache_true",
    "pause_clear_cache_true__resume",
    "pause_mode_null",
    "pause_mode_null__resume",
    "pause_mode_invalid",
    "pause_mode_invalid__is_paused",
    "pause_mode_uppercase",
    "pause_mode_not_string",
    "pause_clear_cache_not_bool",
    "pause_unknown_field",
    "pause_unknown_field__resume",
    "pause_get",
    "pause_get__resume",
    "control_non_object_body",
    "pause_non_object_body",
    "update_non_object_body",
    "control_string_body",
    "engine_unknown_route",
    "engine_unprefixed_control",
    "engine_control_unknown",
    "init_weight_transfer_engine",
    "init_weight_transfer_engine_missing",
    "init_weight_transfer_engine_list",
    "init_weight_transfer_engine_empty_object",
    "flow_pause",
    "start_weight_update",
    "update_weights_object",
    "update_weights_list",
    "update_weights_missing",
    "update_weights_null",
    "finish_weight_update_v1",
    "get_weight_version_after_finish",
    "update_weight_version_v2",
    "get_weight_version_after_update_version",
    "update_weight_version_missing",
    "update_weight_version_empty",
    "update_weight_version_number",
    "update_weight_version_legacy_key",
    "flow_resume",
    "model_taints_missing",
    "model_taints_set",
    "model_taints_clear",
]


def test_recorded_sidecar_replies(client: httpx.Client) -> None:
    """The real 1.6.1 sidecar's /engine exchanges, replayed in their recorded order: the fake
    answers the recorded status and body, byte for byte."""
    with FakeDeployment("vllm", admin_family="sidecar", workers=1) as dep:
        base = base_of(dep)
        for case in REPLAYED:
            recorded = json.loads((RECORDED / f"{case}.json").read_text())
            request, expected = recorded["request"], recorded["response"]
            assert request["target"] == "system", case
            content = json.dumps(request["body"]).encode() if request["body"] is not None else b""
            reply = client.request(request["method"], base + request["url_path"], content=content)
            assert reply.status_code == expected["status"], (case, reply.text)
            assert json.loads(reply.text) == expected["body"], case
