"""Each engine fault, behind the REAL Dynamo 1.6.1 frontend: what the frontend makes of it.

One stack per fault (``--engine-fault NAME`` through ``DynamoLauncher``), so every case sees
exactly one deviation.  Each case asserts what the real frontend did: REJECTED (an HTTP
error, or an error event in a stream), REPAIRED (the client sees the contract honoured), or
PASSED THROUGH (the client sees the deviation).  ``engine_faults.ENGINE_FAULTS[...].observed``
states the same in prose; together they are the pass-through report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from dynamo_stack import Stack, running_stack

from fake_backends.dynamo.engine import SCRIPT_PREFIX
from fake_backends.faults.engine import ADMIN, ENGINE_FAULT_NAMES, ENGINE_FAULTS
from fake_backends.faults.engine import SGLANG_FAMILY_FAULTS as SGLANG_FAMILY
from fake_backends.model.decoding import SamplingParams, generate_choice
from fake_backends.model.tokenizer import EOS_ID, byte_level_ids
from fake_backends.model.toy_model import ToyModel

PROMPT = [316, 276, 330, 275]
ALL_FIELDS = [
    "completion_token_ids",
    "prompt_token_ids",
    "prompt_logprobs",
    "engine_data",
    "stop_reason",
    "detailed_finish_reason",
]
INTERNAL_ERROR = {"message": "Internal server error", "type": "Internal Server Error", "code": 500}
STREAM_ERROR = {
    "error": {"message": "Internal server error", "type": "internal_server_error", "code": 500}
}
VLLM_ROUTE_ERROR = {
    "error": {"message": "internal server error", "type": "internal_error", "code": 500}
}
VLLM_ROUTE_CANCELLED = {
    "error": {"message": "request was cancelled", "type": "request_cancelled", "code": 499}
}


def _body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "toy",
        "prompt": PROMPT,
        "max_tokens": 4,
        "temperature": 0,
        "ignore_eos": True,
        "nvext": {"extra_fields": ALL_FIELDS},
        **extra,
    }


def _chat(stack: Stack, **extra: Any) -> httpx.Response:
    return stack.post(
        "/v1/chat/completions",
        {
            "model": "toy",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4,
            "temperature": 0,
            "ignore_eos": True,
            **extra,
        },
    )


def _vllm_route(stack: Stack, **params: Any) -> httpx.Response:
    return stack.post(
        "/inference/v1/generate",
        {
            "model": "toy",
            "token_ids": PROMPT,
            "sampling_params": {"max_tokens": 4, "temperature": 0, **params},
        },
    )


def _sglang(stack: Stack) -> list[Any]:
    return stack.stream(
        "/generate",
        {
            "model": "toy",
            "stream": True,
            "return_logprob": True,
            "logprob_start_len": 0,
            "input_ids": PROMPT,
            "sampling_params": {"max_new_tokens": 4, "temperature": 0},
        },
    )


def _greedy(weights: str = "initial") -> list[int]:
    params = SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
    return generate_choice(ToyModel(weights), PROMPT, params, 0).token_ids


# ---------------------------------------------------------------- one case per fault


def logprobs_misaligned(stack: Stack) -> None:
    body = stack.completion(**_body(max_tokens=6, logprobs=1))
    logprobs = body["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == 6
    assert len(logprobs["token_logprobs"]) == 2  # PASSED THROUGH: one per 3-token chunk
    chat = _chat(stack, max_tokens=6, logprobs=True).json()
    assert len(chat["choices"][0]["logprobs"]["content"]) == 2  # one entry per chunk
    assert _vllm_route(stack, max_tokens=6, logprobs=1).json() == VLLM_ROUTE_ERROR  # REJECTED


def selected_logprobs_one_short(stack: Stack) -> None:
    body = stack.completion(**_body(logprobs=1))
    logprobs = body["choices"][0]["logprobs"]
    assert (len(logprobs["tokens"]), len(logprobs["token_logprobs"])) == (4, 3)  # PASSED
    events = stack.stream("/v1/completions", _body(logprobs=1, stream=True))
    last = [e for e in events[:-1] if e.get("choices")][-1]["choices"][0]
    assert last["logprobs"]["tokens"] and last["logprobs"]["token_logprobs"] == []
    meta = _sglang(stack)[-2]["meta_info"]
    assert len(meta["output_token_logprobs"]) == 3  # SGLang route: passed through
    assert _vllm_route(stack, logprobs=1).json() == VLLM_ROUTE_ERROR  # vLLM route: REJECTED


def prompt_logprobs_shifted_by_one(stack: Stack) -> None:
    body = stack.completion(**_body(prompt_logprobs=1))
    reported = body["nvext"]["prompt_logprobs"]
    assert reported[:2] == [None, None] and str(PROMPT[1]) in reported[2]  # PASSED THROUGH
    chat = _chat(stack, prompt_logprobs=1).json()
    assert chat["prompt_logprobs"][:2] == [None, None]
    native = _vllm_route(stack, prompt_logprobs=1).json()
    assert native["prompt_logprobs"][:2] == [None, None]
    inputs = _sglang(stack)[-2]["meta_info"]["input_token_logprobs"]
    assert [t[0] for t in inputs[:2]] == [None, None]


def prompt_logprobs_int_keys(stack: Stack) -> None:
    response = stack.post("/v1/completions", _body(prompt_logprobs=1))
    assert (response.status_code, response.json()) == (500, INTERNAL_ERROR)  # REJECTED
    assert stack.post("/v1/completions", _body()).status_code == 200  # only with prompt lps
    events = stack.stream("/v1/completions", _body(prompt_logprobs=1, stream=True))
    assert events[-2:] == [STREAM_ERROR, "[DONE]"]  # 200, then an error event
    assert _vllm_route(stack, prompt_logprobs=1).status_code == 500


def unknown_finish_reason(stack: Stack) -> None:
    response = stack.post("/v1/completions", _body())
    assert (response.status_code, response.json()) == (500, INTERNAL_ERROR)  # REJECTED
    assert _chat(stack).status_code == 500
    events = stack.stream("/v1/completions", _body(stream=True))
    assert events[-2:] == [STREAM_ERROR, "[DONE]"]
    texts = [e for e in events[:-2] if e.get("choices")]
    assert len(texts) == 3  # the token that carried the bad finish reason is lost
    assert _vllm_route(stack).status_code == 500
    # the SGLang-native route forwards the engine's object verbatim: PASSED THROUGH
    assert _sglang(stack)[-2]["meta_info"]["finish_reason"] == {"type": "weird_reason"}


def _cut_short(stack: Stack) -> None:
    body = stack.completion(**_body(max_tokens=6))
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "stop"  # REPAIRED into a plain stop ...
    assert body["nvext"]["detailed_finish_reason"] == "cancelled"  # ... visible only here
    assert len(body["nvext"]["completion_token_ids"]) == 3
    assert _vllm_route(stack).json() == VLLM_ROUTE_CANCELLED  # vLLM route: 499


def cancelled_finish(stack: Stack) -> None:
    _cut_short(stack)
    meta = _sglang(stack)[-2]["meta_info"]
    assert meta["finish_reason"]["type"] == "abort"


def abort_finish(stack: Stack) -> None:
    _cut_short(stack)  # the raw vLLM "abort" is normalized to cancelled by the frontend


def eos_as_stop(stack: Stack) -> None:
    body = stack.completion(**_body(prompt=[*SCRIPT_PREFIX, 300, EOS_ID], ignore_eos=False))
    assert body["nvext"]["completion_token_ids"] == [300, EOS_ID]
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["nvext"]["detailed_finish_reason"] == "stop"  # same as an honest eos
    assert "stop_reason" not in body["nvext"]  # the only difference (honest: 2)


def usage_lies(stack: Stack) -> None:
    body = stack.completion(**_body())
    usage = body["usage"]
    assert usage["prompt_tokens"] == 1004  # PASSED THROUGH (taken from the worker)
    assert usage["completion_tokens"] == 4  # REPAIRED (counted by the frontend)
    assert usage["total_tokens"] == 1008
    meta = _sglang(stack)[-2]["meta_info"]
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (1004, 2004)


def worker_text_field(stack: Stack) -> None:
    body = stack.completion(**_body(logprobs=1))
    (choice,) = body["choices"]
    assert choice["text"] == "<worker-text>" * 4  # PASSED THROUGH, ids ignored for text
    assert choice["logprobs"]["tokens"] == [] and choice["logprobs"]["token_logprobs"] == []
    assert body["nvext"]["completion_token_ids"] == _greedy()
    chat = _chat(stack, logprobs=True).json()
    assert chat["choices"][0]["logprobs"]["content"] == []
    assert _vllm_route(stack).json()["choices"][0]["token_ids"] == _greedy()  # ignored there


def wrong_top_logprob_token(stack: Stack) -> None:
    body = stack.completion(**_body(logprobs=0))
    ids = body["nvext"]["completion_token_ids"]
    for position, token in zip(body["choices"][0]["logprobs"]["top_logprobs"], ids, strict=True):
        assert f"<T{token}>" in position and len(position) == 2  # plus the frontend's own key
    chat = _chat(stack, logprobs=True, top_logprobs=1).json()
    for entry in chat["choices"][0]["logprobs"]["content"]:
        assert entry["top_logprobs"][0]["token"] == f"<T{entry['token_id']}>"  # verbatim


def completion_ids_retokenized(stack: Stack) -> None:
    body = stack.completion(**_body())
    text = body["choices"][0]["text"]
    assert body["nvext"]["completion_token_ids"] == _greedy()
    assert body["nvext"]["engine_data"]["completion_token_ids"] == byte_level_ids(text)


CASES: dict[str, Callable[[Stack], None]] = {
    case.__name__: case
    for case in (
        logprobs_misaligned,
        selected_logprobs_one_short,
        prompt_logprobs_shifted_by_one,
        prompt_logprobs_int_keys,
        unknown_finish_reason,
        cancelled_finish,
        abort_finish,
        eos_as_stop,
        usage_lies,
        worker_text_field,
        wrong_top_logprob_token,
        completion_ids_retokenized,
    )
}
ADMIN_FAULTS = tuple(name for name in ENGINE_FAULT_NAMES if ADMIN in ENGINE_FAULTS[name].applies_to)
# Faults that acknowledge and do nothing; they are shown together on one stack.
# Pause faults, shared with the in-process fake (fake_backends/admin/vllm.py) and shown there
# (tests/fake_backends/faults/test_fake_control_faults.py); one is shown through the real server
# here.
PAUSE_FAULTS = (
    "invalid_pause_mode_accepted",
    "invalid_pause_mode_pauses",
    "second_pause_hangs",
    "unpaused_update_applied",
)
SGLANG_FAMILY_FAULTS = tuple(sorted(SGLANG_FAMILY))
# Declaration faults, shared with the in-process fake and shown there
# (tests/fake_backends/admin/test_fake_version_faults.py); both are shown through the real server.
DECLARATION_FAULTS = ("null_version_undeclared", "unversioned_update_declares")
SILENT_ADMIN_FAULTS = tuple(
    name
    for name in ADMIN_FAULTS
    if name
    not in ("admin_http200_failure_body", *PAUSE_FAULTS, *SGLANG_FAMILY_FAULTS, *DECLARATION_FAULTS)
)


def test_every_engine_fault_has_a_case() -> None:
    assert sorted([*CASES, *ADMIN_FAULTS]) == sorted(ENGINE_FAULT_NAMES)


@pytest.mark.parametrize("name", list(CASES))
def test_engine_fault_at_the_real_frontend(dynamo_python: Path, name: str) -> None:
    with running_stack(dynamo_python, "fake-vllm", (name,), first_request_ok=False) as stack:
        CASES[name](stack)
    assert stack.exit_codes.get("worker-0") == 0  # SIGTERM: clean exit


def test_admin_faults_acknowledge_and_do_nothing(dynamo_python: Path) -> None:
    """weight_version_unchanged + update_keeps_old_weights + pause_not_applied on one worker."""
    with running_stack(dynamo_python, "fake-vllm", SILENT_ADMIN_FAULTS) as stack:
        before = stack.completion(**_body())["nvext"]["completion_token_ids"]
        assert before == _greedy()
        assert stack.admin("pause_generation", {"mode": "keep"})["status"] == "ok"
        # pause_not_applied: a request sent while "paused" is answered at once
        assert stack.completion(**_body())["nvext"]["completion_token_ids"] == before
        assert stack.admin(
            "update_weights_from_disk", {"model_path": "/ckpt/step-1", "weight_version": "step-1"}
        ) == {"status": "ok", "version": "step-1", "version_declared": True}
        # weight_version_unchanged: acknowledged, never reported
        assert stack.admin("get_weight_version") == {
            "status": "ok",
            "version": None,
            "version_declared": False,
        }
        stack.admin("resume_generation")
        # update_keeps_old_weights: generation is unchanged
        after = stack.completion(**_body())["nvext"]
        assert after["completion_token_ids"] == before
        assert after["engine_data"]["weight_version"] is None


def test_an_invalid_pause_mode_accepted_through_the_real_system_server(
    dynamo_python: Path,
) -> None:
    with running_stack(dynamo_python, "fake-vllm", ("invalid_pause_mode_accepted",)) as stack:
        reply = stack.admin("pause_generation", {"mode": "drain"})
        assert reply["status"] == "ok" and reply["mode"] == "keep"
        stack.admin("resume_generation")


def test_a_failed_update_is_http_200_with_a_failure_body(dynamo_python: Path) -> None:
    """admin_http200_failure_body through the real system server: 200, status error."""
    with running_stack(dynamo_python, "fake-vllm", ("admin_http200_failure_body",)) as stack:
        before = stack.completion(**_body())["nvext"]["completion_token_ids"]
        assert stack.admin("pause_generation", {"mode": "keep"})["status"] == "ok"
        reply = stack.admin("update_weights_from_disk", {"model_path": "/ckpt/step-1"})
        assert reply["status"] == "error"
        stack.admin("resume_generation")
        assert stack.completion(**_body())["nvext"]["completion_token_ids"] == before


def test_declaration_faults_through_the_real_system_server(dynamo_python: Path) -> None:
    """A null declaration keeps the previous version; an update without weight_version
    declares 'unknown' though its reply says it declared nothing."""
    with running_stack(dynamo_python, "fake-vllm", DECLARATION_FAULTS) as stack:
        stack.admin("set_weight_version", {"weight_version": "v1"})
        stack.admin("set_weight_version", {"weight_version": None})
        assert stack.admin("get_weight_version")["version"] == "v1"
        assert stack.admin("pause_generation", {"mode": "keep"})["status"] == "ok"
        reply = stack.admin("update_weights_from_disk", {"model_path": "/ckpt/step-1"})
        assert reply == {"status": "ok", "version": "unknown", "version_declared": False}
        stack.admin("resume_generation")
        assert stack.admin("get_weight_version")["version"] == "unknown"


def _generate_instances(stack: Stack) -> list[int]:
    health = stack.http.get(stack.target.frontend_url + "/health").json()
    return [i["instance_id"] for i in health["instances"] if i["endpoint"] == "generate"]


def _listed_within(stack: Stack, count: int, bound_s: float = 5.0) -> bool:
    deadline = time.monotonic() + bound_s
    while len(_generate_instances(stack)) != count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("faults", [(), SGLANG_FAMILY_FAULTS], ids=["clean", "listed"])
def test_a_stopped_sglang_worker_leaves_the_real_frontends_routing(
    dynamo_python: Path, faults: tuple[str, ...]
) -> None:
    """Our SGLang-family worker unregisters as Dynamo's SGLang worker does, and the real frontend's
    /health drops the instance at once and lists it again on restore; under the fault it stays."""
    with running_stack(dynamo_python, "fake-sglang", faults) as stack:
        base = stack.target.worker_urls[0]
        assert len(_generate_instances(stack)) == 1
        for stop, restore in (
            ("pause_generation", "continue_generation"),
            ("release_memory_occupation", "resume_memory_occupation"),
        ):
            assert stack.http.post(f"{base}/engine/{stop}", json={}).status_code == 200
            assert _listed_within(stack, 0) is not bool(faults)
            assert stack.http.post(f"{base}/engine/{restore}", json={}).status_code == 200
            assert _listed_within(stack, 1)
        assert stack.completion(**_body())["choices"]
