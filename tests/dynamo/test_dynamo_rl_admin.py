"""RL admin routes of the toy worker, driven through the REAL Dynamo 1.6.1 system server.

The flow an RL trainer runs (pause -> update -> version -> resume -> new tokens) and the
pause modes, against its own stack (weight updates change the shared state, so these tests
do not share a stack with the generation tests).  Replies are compared with the exact dicts
``dynamo/vllm/handlers.py`` returns; handled errors are HTTP 200 ``{"status": "error"}``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from dynamo_stack import Stack, running_stack, stack_fixture

from fake_backends.model.decoding import SamplingParams, generate_choice
from fake_backends.model.toy_model import ToyModel

stack = stack_fixture("fake-vllm")

PROMPT = [316, 276, 330, 275]
NOT_PAUSED = (
    "Worker must be paused via pause_generation() before updating weights. Call "
    "pause_generation() first, then update, then resume_generation()."
)
HOLD_S = 0.5


def _greedy(weights: str, max_tokens: int = 6) -> list[int]:
    params = SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True)
    return generate_choice(ToyModel(weights), PROMPT, params, 0).token_ids


def _request_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "toy",
        "prompt": PROMPT,
        "max_tokens": 6,
        "temperature": 0,
        "ignore_eos": True,
        "nvext": {
            "extra_fields": ["completion_token_ids", "engine_data", "detailed_finish_reason"]
        },
        **extra,
    }


class _Background:
    """A request sent from a thread, so the test can act while the engine holds it."""

    def __init__(self, call: Callable[[], httpx.Response]) -> None:
        self.response: httpx.Response | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], httpx.Response]) -> None:
        try:
            self.response = call()
        except BaseException as exc:  # reported by result()
            self.error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout: float = 10.0) -> dict[str, Any]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the request did not finish"
        assert self.error is None, self.error
        assert self.response is not None and self.response.status_code == 200, self.response
        return self.response.json()


def _complete(stack: Stack) -> dict[str, Any]:
    response = stack.post("/v1/completions", _request_body())
    assert response.status_code == 200, response.text
    return response.json()


def _send(stack: Stack, **extra: Any) -> _Background:
    already = len(stack.logged_requests())

    def call() -> httpx.Response:
        with httpx.Client(timeout=30.0, trust_env=False) as client:
            return client.post(stack.frontend + "/v1/completions", json=_request_body(**extra))

    background = _Background(call)
    stack.wait_for_request(already)
    return background


def test_handled_errors_and_plain_replies(stack: Stack) -> None:
    assert stack.admin("get_weight_version") == {
        "status": "ok",
        "version": None,
        "version_declared": False,
    }
    assert stack.admin("update_weights_from_disk", {"model_path": "/ckpt"}) == {
        "status": "error",
        "message": NOT_PAUSED,
    }
    assert stack.admin("pause_generation", {"mode": "sideways"}) == {
        "status": "error",
        "message": "Invalid mode 'sideways'; expected keep|wait|abort",
    }
    assert stack.admin("abort_request") == {
        "status": "error",
        "message": "Missing 'request_id' in body",
    }
    assert stack.admin("abort_request", {"request_id": "nobody"}) == {
        "status": "ok",
        "request_id": "nobody",
    }
    assert stack.admin("set_weight_version") == {
        "status": "error",
        "message": "Missing 'weight_version' in body",
    }
    assert stack.admin("update_weights_from_tensor", {"names": ["w"]}) == {
        "status": "error",
        "message": "update_weights_from_tensor is not implemented",
    }
    assert stack.admin("flush_cache") == {"status": "ok", "message": "Cache flushed"}
    assert stack.admin("resume_generation") == {"status": "ok", "message": "Engine resumed"}
    reply = stack.http.post(stack.system_url() + "/engine/liveness_probe", json=[1, 2])
    assert reply.json() == {"status": "error", "message": "request body must be a JSON object"}
    unknown = stack.http.post(stack.system_url() + "/engine/nope", json={})
    assert unknown.status_code == 404


def test_pause_update_version_resume_changes_tokens(stack: Stack) -> None:
    before = _complete(stack)
    assert before["nvext"]["completion_token_ids"] == _greedy("initial")

    assert stack.admin("pause_generation", {"mode": "keep"}) == {
        "status": "ok",
        "message": "Engine paused",
        "mode": "keep",
        "clear_cache": False,
    }
    held = _send(stack)
    time.sleep(HOLD_S)
    assert not held.done(), "pause(keep) must hold a new request until resume"

    assert stack.admin(
        "update_weights_from_disk", {"model_path": "/ckpt/step-1", "weight_version": "step-1"}
    ) == {"status": "ok", "version": "step-1", "version_declared": True}
    assert stack.admin("get_weight_version") == {
        "status": "ok",
        "version": "step-1",
        "version_declared": True,
    }
    assert stack.admin("flush_cache") == {"status": "ok", "message": "Cache flushed"}
    assert not held.done()
    assert stack.admin("resume_generation") == {"status": "ok", "message": "Engine resumed"}

    released = held.result()
    new_ids = _greedy("path:/ckpt/step-1")
    assert new_ids != before["nvext"]["completion_token_ids"]
    assert released["nvext"]["completion_token_ids"] == new_ids
    assert released["nvext"]["engine_data"]["weight_version"] == "step-1"
    after = _complete(stack)
    assert after["nvext"]["completion_token_ids"] == new_ids
    assert after["choices"][0]["text"] != before["choices"][0]["text"]


def test_update_without_version_is_not_declared(stack: Stack) -> None:
    stack.admin("pause_generation", {"mode": "keep"})
    assert stack.admin("update_weights_from_disk", {"model_path": "/ckpt/step-2"}) == {
        "status": "ok",
        "version": "unknown",
        "version_declared": False,
    }
    stack.admin("resume_generation")
    assert stack.admin("get_weight_version")["version"] == "step-1"  # unchanged
    assert _complete(stack)["nvext"]["completion_token_ids"] == _greedy("path:/ckpt/step-2")
    assert stack.admin("set_weight_version", {"weight_version": 7}) == {
        "status": "ok",
        "version": 7,
    }
    assert stack.admin("get_weight_version") == {
        "status": "ok",
        "version": 7,
        "version_declared": True,
    }


def test_pause_abort_ends_held_requests_as_cancelled(stack: Stack) -> None:
    stack.admin("pause_generation", {"mode": "keep"})
    held = _send(stack)
    assert stack.admin("pause_generation", {"mode": "abort"})["status"] == "ok"
    body = held.result()
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "stop"  # 1.6.1 shows an engine 'cancelled' as stop
    assert body["nvext"]["detailed_finish_reason"] == "cancelled"
    assert body["nvext"]["completion_token_ids"] == []
    later = _send(stack)  # still paused after an abort: new requests wait
    time.sleep(HOLD_S)
    assert not later.done()
    stack.admin("resume_generation")
    assert later.result()["choices"][0]["finish_reason"] == "length"


def test_abort_request_by_id(stack: Stack) -> None:
    stack.admin("pause_generation", {"mode": "keep"})
    already = len(stack.logged_requests())
    held = _send(stack)
    request_id = stack.logged_requests()[already][0]
    assert stack.admin("abort_request", {"request_id": request_id}) == {
        "status": "ok",
        "request_id": request_id,
    }
    body = held.result()  # ends although the engine is still paused
    assert body["nvext"]["detailed_finish_reason"] == "cancelled"
    assert body["id"].endswith(request_id)  # the response id carries the engine request id
    stack.admin("resume_generation")


def test_pause_wait_holds_new_requests_only(stack: Stack) -> None:
    started = time.monotonic()
    assert stack.admin("pause_generation", {"mode": "wait"})["mode"] == "wait"
    assert time.monotonic() - started < 2.0  # nothing in flight: returns at once
    held = _send(stack)
    time.sleep(HOLD_S)
    assert not held.done()
    stack.admin("resume_generation")
    assert held.result()["choices"][0]["finish_reason"] == "length"


def test_distributed_update_changes_weights(stack: Stack) -> None:
    before = _complete(stack)["nvext"]["completion_token_ids"]
    stack.admin("pause_generation", {"mode": "keep"})
    assert stack.admin("update_weights_from_distributed", {"names": ["w"]})["status"] == "error"
    assert stack.admin("init_weights_update_group", {"master_address": "127.0.0.1"}) == {
        "status": "ok",
        "message": "Weight update group initialized",
    }
    assert stack.admin(
        "update_weights_from_distributed", {"names": ["w"], "weight_version": "step-3"}
    ) == {"status": "ok", "version": "step-3", "version_declared": True}
    stack.admin("resume_generation")
    after = _complete(stack)["nvext"]["completion_token_ids"]
    assert after != before
    assert stack.admin(
        "update_weights_from_distributed", {"allow_unpaused": True, "reset_prefix_cache": True}
    )["message"].startswith("Unpaused weight updates cannot reset the prefix cache")
    assert (
        stack.admin(
            "update_weights_from_distributed", {"allow_unpaused": True, "reset_prefix_cache": False}
        )["status"]
        == "ok"
    )
    assert stack.admin("destroy_weights_update_group") == {
        "status": "ok",
        "message": "Weight update group destroyed",
    }


@pytest.mark.parametrize("route", ["update_weights_from_disk", "pause_generation"])
def test_admin_routes_answer_get_with_empty_body(stack: Stack, route: str) -> None:
    reply = stack.http.get(f"{stack.system_url()}/engine/{route}")
    assert reply.status_code == 200
    if route == "pause_generation":
        stack.admin("resume_generation")


def test_sigint_releases_held_requests_and_exits_cleanly(dynamo_python: Path) -> None:
    with running_stack(dynamo_python, "fake-vllm") as own:
        (worker,) = [p for p in own.launcher.processes if p.name == "worker-0"]
        own.admin("pause_generation", {"mode": "keep"})
        held = _send(own)
        assert worker.pid is not None and worker.process is not None
        os.kill(worker.pid, signal.SIGINT)
        assert worker.process.wait(timeout=10) == 0
        body = held.result()
        assert body["choices"][0]["finish_reason"] == "stop"
        assert body["nvext"]["detailed_finish_reason"] == "cancelled"
        # the worker left discovery on its way out: the model is gone at once
        assert own.http.get(own.frontend + "/v1/models").json()["data"] == []
