"""The real vLLM column (``fixtures/dynamo-1.6.1/vllm-cpu``: the real Dynamo 1.6.1 frontend in
front of a real vLLM 0.31.0 worker) holds the fake vLLM deployment more tightly than the toy
worker's recordings (``test_fake_recorded_shapes.py``): ``engine_data`` and ``usage`` key by key,
admin replies value for value in the recorded order, the pause modes with a request in flight,
stop handling and the context-length error.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest
from fake_backend_helpers import parse_sse
from test_fake_recorded_shapes import RECORDINGS, _assert_same_answer, _replay, vllm_sig

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.deployment.pytest_fixtures import make_fake_deployment_fixture
from fake_backends.model.directory import CONTEXT_LENGTH

VLLM_CPU = RECORDINGS.parent / "vllm-cpu"
# Like the recorded stack: one worker serving `tiny` (the fake's vocabulary has the real
# model's 32768 ids). Its own deployment, because the admin replay pauses and updates it.
tiny = make_fake_deployment_fixture(
    "tiny", "vllm", scope="module", workers=1, model="tiny", dynamo_release="1.6.1"
)
# Not replayed one by one, with the reason (each is held by a test below or is deliberate).
VLLM_CPU_ELSEWHERE = {
    "completions_stop_string": "tokens differ: test_vllm_stop_shapes",
    "completions_stream_stop_string": "tokens differ: test_vllm_stop_shapes",
    "completions_stop_token_ids": "tokens differ: test_vllm_stop_shapes",
    "completions_prompt_too_long": "context differs: test_vllm_context_length_error",
    "completions_prompt_too_long_stream": "context differs: test_vllm_context_length_error",
    "completions_prompt_plus_max_tokens_too_long": "context: test_vllm_context_length_error",
    "chat_prompt_too_long": "context differs: test_vllm_context_length_error",
    "openapi_json": "deliberate: the fake never claims Dynamo's title and version",
    "worker_metrics": "the fake's series are a subset (tests/wire/test_prometheus)",
    "frontend_metrics": "the fake's series are a subset (tests/wire/test_prometheus)",
    "worker_health": "deliberate: the fake worker registers generate and rl only",
    "worker_live": "deliberate: the fake worker registers generate and rl only",
    "worker_health_while_paused": "deliberate: the fake worker registers generate and rl only",
    "models_while_paused": "state: test_vllm_admin_sequence",
    "rl_workers_while_paused": "state: test_vllm_admin_sequence",
}
# The administration exchanges, in the order they were recorded (vllm-cpu/README.md).
ADMIN_SEQUENCE = (
    "admin_get_weight_version_initial",
    "admin_get_weight_version_get",
    "admin_liveness_probe",
    "admin_flush_cache",
    "pause_no_body",
    "models_while_paused",
    "rl_workers_while_paused",
    "resume_after_pause_no_body",
    "pause_empty_object",
    "resume_after_pause_empty_object",
    "pause_keep",
    "pause_while_paused",
    "resume_after_pause_keep",
    "resume_while_not_paused",
    "pause_wait_idle",
    "resume_after_pause_wait_idle",
    "pause_abort_idle",
    "resume_after_pause_abort_idle",
    "pause_invalid_mode",
    "pause_keep_clear_cache",
    "resume_after_pause_keep_clear_cache",
    "pause_non_object_body",
    "flow_02_update_unpaused",
    "flow_03_pause_keep",
    "flow_04_update_missing_model_path",
    "flow_05_update_weights_from_disk",
    "flow_06_get_weight_version_after_update",
    "flow_07_flush_cache_paused",
    "flow_08_resume",
    "flow_11_pause_keep",
    "flow_12_update_back_no_version",
    "flow_13_get_weight_version_after_unversioned_update",
    "flow_14_resume",
    "flow_16_set_weight_version",
    "flow_17_get_weight_version",
    "flow_18_set_weight_version_missing",
    "flow_19_set_weight_version_number",
    "flow_20_get_weight_version_number",
    "flow_21_set_weight_version_back",
    "admin_abort_request_missing_id",
    "admin_abort_request_unknown_id",
    "admin_update_weights_from_tensor",
    "admin_update_distributed_bad_flag",
    "admin_update_distributed_unpaused",
    "admin_unknown_route",
    "admin_invalid_json",
    "admin_non_object_body",
    "admin_text_plain",
    "worker_unknown_path",
)


def _vllm_recording(name: str) -> dict[str, Any]:
    recorded: dict[str, Any] = json.loads((VLLM_CPU / f"{name}.json").read_text())
    return recorded


def _vllm_cases() -> list[str]:
    if not VLLM_CPU.is_dir():
        return []
    out = []
    for path in sorted(VLLM_CPU.glob("*.json")):
        recorded = json.loads(path.read_text())
        timed = "observed_first_byte_s" in recorded or "observed_latency_s" in recorded
        if timed or path.stem in VLLM_CPU_ELSEWHERE or path.stem in ADMIN_SEQUENCE:
            continue  # concurrent or stateful: test_vllm_pause_modes / test_vllm_admin_sequence
        if path.stem.startswith(("flow_", "cache_", "pause_", "resume_after_pause_")):
            continue  # test_vllm_admin_sequence, test_vllm_pause_modes_in_flight, ..._held
        out.append(path.stem)
    return out


@pytest.mark.parametrize(
    "case", _vllm_cases() or [pytest.param("none", marks=pytest.mark.skip("no recordings"))]
)
def test_vllm_shape_matches_recording(
    case: str, client: httpx.Client, tiny: FakeDeployment
) -> None:
    """Every stateless exchange with real vLLM: status, headers, shape with engine_data."""
    recorded = _vllm_recording(case)
    got = _replay(client, tiny, recorded["request"])
    _assert_same_answer(got, recorded["response"], vllm_sig)


def _completion_ids(client: httpx.Client, dep: FakeDeployment, name: str) -> list[int]:
    reply = _replay(client, dep, _vllm_recording(name)["request"])
    assert reply.status_code == 200, reply.text
    ids: list[int] = reply.json()["nvext"]["completion_token_ids"]
    return ids


def _cached(client: httpx.Client, dep: FakeDeployment, name: str) -> tuple[int, int]:
    """(usage cached_tokens, engine_data.kv_cache_hit.reused_tokens) of a replayed request."""
    recorded = _vllm_recording(name)
    reply = _replay(client, dep, recorded["request"])
    expected = recorded["response"]
    _assert_same_answer(reply, expected, vllm_sig)
    if expected.get("sse_events") is not None:
        events = [e for e in parse_sse(reply.text) if e != "[DONE]"]
        usage = events[-1]["usage"]
        hit = next(e["nvext"] for e in events if "engine_data" in (e.get("nvext") or {}))
    else:
        usage, hit = reply.json()["usage"], reply.json()["nvext"]
    reused = hit["engine_data"]["kv_cache_hit"]["reused_tokens"]
    return usage["prompt_tokens_details"]["cached_tokens"], reused


def test_vllm_admin_sequence(client: httpx.Client, tiny: FakeDeployment) -> None:
    """The recorded administration run, in order: every reply equal to real vLLM's (status,
    content type, body value for value), and what it did to generation: a repeated prompt
    reuses its prefix until a flush or an update, an update changes the tokens, the update
    back restores them, and nothing leaves discovery while paused."""
    recorded_cached = {
        name: _cached_recorded(name) for name in ("cache_01_first", "cache_02_repeat")
    }
    assert recorded_cached["cache_01_first"] == (0, 0) and recorded_cached["cache_02_repeat"][0]
    assert _cached(client, tiny, "cache_01_first") == (0, 0)
    for name in ADMIN_SEQUENCE:
        recorded = _vllm_recording(name)
        request, expected = recorded["request"], recorded["response"]
        if name == "flow_02_update_unpaused":
            before = _completion_ids(client, tiny, "flow_01_completion_before_update")
        if name == "flow_11_pause_keep":
            after = _completion_ids(client, tiny, "flow_09_completion_after_update")
            assert after != before  # the update changed the weights, as recorded
            assert _cached(client, tiny, "flow_10_cache_after_update")[0] == 0
        if name == "flow_16_set_weight_version":
            # Real: back to the launch weights. The fake's launch weights are no checkpoint
            # path, so the update back only changes the tokens again.
            assert _completion_ids(client, tiny, "flow_15_completion_after_revert") != after
        got = _replay(client, tiny, request)
        assert got.status_code == expected["status"], (name, got.text)
        assert got.headers.get("content-type") == expected["headers"].get("content-type"), name
        if request["target"] == "system" and expected["status"] == 200:
            assert json.loads(got.text) == expected["body"], name  # a handler's reply
        elif request["target"] == "system" and expected["body"] is not None:
            reply = json.loads(got.text)  # the dispatcher's: serde's parse message aside
            assert vllm_sig(reply) == vllm_sig(expected["body"]), name
            assert reply["error"] == expected["body"]["error"], name
        else:
            _assert_same_answer(got, expected, vllm_sig)
        if name == "admin_flush_cache":
            assert _cached(client, tiny, "cache_03_after_flush") == (0, 0)
            assert _cached(client, tiny, "cache_04_repeat_stream")[0] > 0
        if name == "admin_get_weight_version_get":
            cached, reused = _cached(client, tiny, "cache_02_repeat")
            assert cached == reused > 0  # real: 96 of 100 (whole 32-token blocks)
            _cached(client, tiny, "cache_02_repeat_chat_token_data")


def _cached_recorded(name: str) -> tuple[int, int]:
    body = _vllm_recording(name)["response"]["body"]
    return (
        body["usage"]["prompt_tokens_details"]["cached_tokens"],
        body["nvext"]["engine_data"]["kv_cache_hit"]["reused_tokens"],
    )


class _InFlight(threading.Thread):
    """A recorded request replayed slowly (10 ms a token) in the background."""

    def __init__(self, client: httpx.Client, dep: FakeDeployment, body: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.url = dep.frontend_url + "/v1/completions"
        self.client, self.body = client, body
        self.reply: httpx.Response | None = None

    def run(self) -> None:
        headers = {"x-fake-token-delay-ms": "10", "x-request-id": "in-flight"}
        self.reply = self.client.post(self.url, json=self.body, headers=headers, timeout=30)

    def result(self) -> httpx.Response:
        self.join(30)
        assert self.reply is not None, "the request in flight did not end"
        return self.reply


@pytest.mark.parametrize(
    "mode, recording",
    [
        ("keep", "stream_during_pause_keep"),
        ("wait", "stream_during_pause_wait"),
        ("abort", "stream_during_pause_abort_all_selectors"),
        ("abort", "completion_during_pause_abort_all_selectors"),
    ],
)
def test_vllm_pause_modes_in_flight(
    mode: str, recording: str, client: httpx.Client, tiny: FakeDeployment
) -> None:
    """A request in flight when the worker is paused ends as real vLLM's did: keep freezes it
    and it completes after the resume, wait answers the pause only once it completed, abort
    ends it at once with finish_reason "stop" (detailed_finish_reason "cancelled", visible
    only through the selector) and the tokens generated so far."""
    recorded = _vllm_recording(recording)
    expected = recorded["response"]
    # The real model met no EOS in 300 tokens; the toy model would.
    body = {**recorded["request"]["body"], "ignore_eos": True}
    base = tiny.workers[0]["system_url"]
    flight = _InFlight(client, tiny, body)
    flight.start()
    time.sleep(0.3)
    paused = client.post(f"{base}/engine/pause_generation", json={"mode": mode})
    answered_at = time.time()
    assert json.loads(paused.text) == _vllm_recording(f"pause_{mode}_in_flight")["response"]["body"]
    time.sleep(0.3)
    resumed = client.post(f"{base}/engine/resume_generation", json={})
    assert json.loads(resumed.text) == {"status": "ok", "message": "Engine resumed"}
    got = flight.result()
    if mode == "wait":  # the pause was answered after the request ended, by the server's clock
        (record,) = [r for r in tiny.request_ledger if r.attempt_id == "in-flight"][-1:]
        assert record.ended_at is not None and record.ended_at <= answered_at
    _assert_same_answer(got, expected, vllm_sig)
    max_tokens = body["max_tokens"]
    if expected.get("sse_events") is not None:
        chunks = [e for e in parse_sse(got.text) if e != "[DONE]"]
        finish, usage = chunks[-2], chunks[-1]["usage"]
        recorded_finish = [e for e in expected["sse_events"] if e != "[DONE]"][-2]
        assert (
            finish["choices"][0]["finish_reason"] == recorded_finish["choices"][0]["finish_reason"]
        )
        assert vllm_sig(finish) == vllm_sig(recorded_finish)
        generated = usage["completion_tokens"]
    else:
        choice = got.json()["choices"][0]
        assert choice["finish_reason"] == expected["body"]["choices"][0]["finish_reason"]
        generated = got.json()["usage"]["completion_tokens"]
        assert len(got.json()["nvext"]["completion_token_ids"]) == generated
    if mode == "abort":
        assert 0 < generated < max_tokens  # cut short, with what was generated
        nvext = (finish if expected.get("sse_events") is not None else got.json())["nvext"]
        assert nvext["detailed_finish_reason"] == "cancelled"
    else:
        assert generated == max_tokens


@pytest.mark.parametrize(
    "pause, held",
    [
        ("pause_no_body", "completion_held_during_pause_no_body"),
        ("pause_abort_then_new_request", "completion_sent_while_paused_abort"),
    ],
)
def test_vllm_request_sent_while_paused_is_held(
    pause: str, held: str, client: httpx.Client, tiny: FakeDeployment
) -> None:
    """Whatever the pause mode, a request sent while paused waits (no 503, nothing leaves
    discovery) and is served normally after the resume: real vLLM answered ~1.5 s later."""
    recorded = _vllm_recording(pause)
    got = _replay(client, tiny, recorded["request"])
    assert json.loads(got.text) == recorded["response"]["body"]
    expected = _vllm_recording(held)
    flight = _InFlight(client, tiny, expected["request"]["body"])
    flight.start()
    time.sleep(0.3)
    assert flight.reply is None  # held
    resumed = _replay(client, tiny, _vllm_recording(f"resume_after_{pause}")["request"])
    assert json.loads(resumed.text) == {"status": "ok", "message": "Engine resumed"}
    _assert_same_answer(flight.result(), expected["response"], vllm_sig)


def test_vllm_stop_shapes(client: httpx.Client, tiny: FakeDeployment) -> None:
    """A stop string ends with stop_reason = the string and no engine_data (the frontend
    matched it and dropped the engine's final output); a stop token id with stop_reason =
    the id, engine_data kept. The real recordings stop at their second token; so does the
    fake, at its own second token."""
    greedy = _replay(client, tiny, _vllm_recording("completions_logprobs_0")["request"]).json()
    second = greedy["choices"][0]["logprobs"]["tokens"][1]
    ids = _completion_ids(client, tiny, "completions_completion_token_ids")
    for name, stop in (
        ("completions_stop_string", {"stop": [second.strip()]}),
        ("completions_stream_stop_string", {"stop": [second.strip()]}),
        ("completions_stop_token_ids", {"stop_token_ids": [ids[1]]}),
    ):
        recorded = _vllm_recording(name)
        request = dict(recorded["request"])
        request["body"] = {**request["body"], **stop}
        got = _replay(client, tiny, request)
        _assert_same_answer(got, recorded["response"], vllm_sig)


@pytest.mark.parametrize(
    "case",
    [
        "completions_prompt_too_long",
        "completions_prompt_too_long_stream",
        "completions_prompt_plus_max_tokens_too_long",
        "chat_prompt_too_long",
    ],
)
def test_vllm_context_length_error(case: str, client: httpx.Client, tiny: FakeDeployment) -> None:
    """The same request, its prompt moved by the difference of the two context windows (the
    recording's 2048, the fake's own), is refused with the same body: 400 `Invalid request`
    with `details` {type: context_length, limit, actual}."""
    recorded = _vllm_recording(case)
    expected = recorded["response"]
    limit = expected["body"]["details"]["limit"]
    shift = CONTEXT_LENGTH - limit
    body = json.loads(json.dumps(recorded["request"]["body"]))
    holder = body["nvext"] if "token_data" in body.get("nvext", {}) else body
    field = "token_data" if holder is not body else "prompt"
    holder[field] = holder[field] + [100] * shift
    got = _replay(client, tiny, {**recorded["request"], "body": body})
    assert got.status_code == expected["status"]
    assert got.headers["content-type"] == expected["headers"]["content-type"]
    details = {**expected["body"]["details"], "limit": CONTEXT_LENGTH}
    details["actual"] += shift
    assert got.json() == {**expected["body"], "details": details}
