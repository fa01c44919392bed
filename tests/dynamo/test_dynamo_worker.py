"""The toy worker behind the REAL Dynamo 1.6.1 frontend: generation surfaces.

What is proven here, against one shared stack (broker + real frontend + our worker, started
like ``DynamoLauncher('fake-vllm')``):

* the real frontend detokenizes ids exactly as ``fake_backends.model.tokenizer.decode`` does (also
  broken UTF-8 and specials, streaming and not), and renders chat prompts exactly as
  ``render_chat`` does;
* what the frontend reports (ids, logprobs, top logprobs, prompt logprobs, usage) is what
  ``fake_backends.model.decoding`` computes for the same request: the real stack and our fake
  deployment agree on the numbers;
* n=2, streaming, the SGLang-native ``/generate`` and the vLLM-native ``/inference/v1/generate``;
* ``/v1/rl/workers`` lists the worker with its model, routes and system URL.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from dynamo_stack import Stack, stack_fixture

from fake_backends.dynamo.engine import SCRIPT_PREFIX
from fake_backends.model.decoding import SamplingParams, generate_choice, score_prompt
from fake_backends.model.tokenizer import EOS_ID, FIRST_BYTE_ID, decode, display_text, render_chat
from fake_backends.model.toy_model import ToyModel

stack = stack_fixture("fake-vllm")

PROMPT = [316, 276, 330, 275]
MODEL = ToyModel("initial")


def approx32(expected: Any) -> Any:
    """The frontend re-encodes most logprobs as f32."""
    return pytest.approx(expected, rel=1e-6, abs=1e-6)


# The vLLM Python worker's RL routes (dynamo/vllm/worker_factory.py, 1.6.1), sorted.
VLLM_RL_ROUTES = sorted(
    [
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
)


def _byte(value: int) -> int:
    return FIRST_BYTE_ID + value


def _expected(prompt: list[int], max_tokens: int, top_k: int | None = None, **kw: Any) -> Any:
    return generate_choice(
        MODEL, prompt, SamplingParams(max_tokens=max_tokens, top_k=top_k, **kw), 0
    )


def test_launch_to_first_completion_is_quick(stack: Stack) -> None:
    assert stack.launch_to_first_200_s < 30.0
    models = stack.http.get(stack.frontend + "/v1/models").json()["data"]
    assert [(m["id"], m["context_window"]) for m in models] == [("toy", 4096)]


@pytest.mark.parametrize(
    "ids",
    [
        [_byte(0xC3), _byte(0xA9), 300],  # a two-byte character split over two tokens
        [_byte(0x80), 300],  # a lone continuation byte
        [300, _byte(0xE6), _byte(0x97)],  # a character cut short at the end
        [5, 300, 6, _byte(65), EOS_ID + 0],  # specials vanish (EOS last ends the choice)
        [_byte(0xF0), _byte(0x9F), _byte(0x98), _byte(0x80), 301],  # a four-byte emoji
        list(range(263, 300)),  # the punctuation pieces and the first syllables
    ],
)
def test_frontend_detokenizes_like_decode(stack: Stack, ids: list[int]) -> None:
    """Scripted ids (see SCRIPT_PREFIX) through /v1/completions, non-stream and stream."""
    body = {"model": "toy", "prompt": [*SCRIPT_PREFIX, *ids], "max_tokens": 64}
    whole = stack.completion(**body, nvext={"extra_fields": ["completion_token_ids"]})
    assert whole["nvext"]["completion_token_ids"] == ids
    assert whole["choices"][0]["text"] == decode(ids)
    events = stack.stream("/v1/completions", {**body, "stream": True})
    streamed = "".join(e["choices"][0]["text"] for e in events[:-1] if e["choices"])
    assert streamed == decode(ids)
    assert events[-1] == "[DONE]"


def test_sampled_text_equals_decode_of_the_ids(stack: Stack) -> None:
    for seed in range(8):
        body = stack.completion(
            prompt=PROMPT,
            max_tokens=32,
            temperature=1.0,
            seed=seed,
            ignore_eos=True,
            nvext={"extra_fields": ["completion_token_ids"]},
        )
        ids = body["nvext"]["completion_token_ids"]
        assert len(ids) == 32
        assert body["choices"][0]["text"] == decode(ids)


def test_chat_prompt_is_rendered_like_render_chat(stack: Stack) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello world, ba ba"},
        {"role": "assistant", "content": "hi."},
        {"role": "user", "content": [{"type": "text", "text": "again"}]},
    ]
    response = stack.post(
        "/v1/chat/completions",
        {
            "model": "toy",
            "messages": messages,
            "max_tokens": 2,
            "nvext": {"extra_fields": ["prompt_token_ids"]},
        },
    )
    assert response.status_code == 200, response.text
    assert response.json()["nvext"]["prompt_token_ids"] == render_chat(messages)


def test_text_prompt_is_encoded_like_encode(stack: Stack) -> None:
    from fake_backends.model.tokenizer import encode

    text = "hello world, this is a tokenizer check... ok?\n\nyes -- é!"
    body = stack.completion(prompt=text, max_tokens=1, nvext={"extra_fields": ["prompt_token_ids"]})
    assert body["nvext"]["prompt_token_ids"] == encode(text)


def test_completion_logprobs_match_the_toy_model(stack: Stack) -> None:
    body = stack.completion(
        prompt=PROMPT,
        max_tokens=6,
        temperature=0,
        logprobs=2,
        nvext={"extra_fields": ["completion_token_ids"]},
    )
    expected = _expected(PROMPT, 6, top_k=2, temperature=0)
    choice = body["choices"][0]
    assert body["nvext"]["completion_token_ids"] == expected.token_ids
    assert choice["text"] == decode(expected.token_ids)
    assert choice["logprobs"]["token_logprobs"] == approx32(expected.logprobs)
    assert choice["logprobs"]["tokens"] == [display_text(t) for t in expected.token_ids]
    for reported, step in zip(choice["logprobs"]["top_logprobs"], expected.steps, strict=True):
        wanted = {display_text(a.token_id): a.logprob for a in step.top}
        assert reported == approx32(wanted)
    assert body["usage"] == {
        "prompt_tokens": 4,
        "completion_tokens": 6,
        "total_tokens": 10,
        "prompt_tokens_details": {"audio_tokens": None, "cached_tokens": 0},
    }


def test_eos_ends_the_choice_and_stays_in_the_ids(stack: Stack) -> None:
    body = stack.completion(
        prompt=PROMPT,
        max_tokens=64,
        temperature=0,
        logprobs=1,
        nvext={"extra_fields": ["completion_token_ids", "stop_reason", "detailed_finish_reason"]},
    )
    expected = _expected(PROMPT, 64, temperature=0)
    assert expected.finish == "eos"
    ids = body["nvext"]["completion_token_ids"]
    assert ids == expected.token_ids and ids[-1] == EOS_ID
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["nvext"]["detailed_finish_reason"] == "stop"  # 1.6.1 folds eos into stop
    assert body["nvext"]["stop_reason"] == EOS_ID
    assert body["choices"][0]["logprobs"]["tokens"][-1] == ""


def test_ignore_eos_and_max_tokens_default(stack: Stack) -> None:
    body = stack.completion(prompt=PROMPT, max_tokens=40, temperature=0, ignore_eos=True)
    assert body["usage"]["completion_tokens"] == 40
    assert body["choices"][0]["finish_reason"] == "length"
    default = stack.completion(prompt=PROMPT, temperature=0, ignore_eos=True)
    assert default["usage"]["completion_tokens"] == 16  # the engine's default for null


def test_prompt_logprobs_match_the_toy_model(stack: Stack) -> None:
    body = stack.completion(
        prompt=PROMPT,
        max_tokens=2,
        temperature=0,
        prompt_logprobs=2,
        nvext={"extra_fields": ["prompt_logprobs", "engine_data"]},
    )
    reported = body["nvext"]["prompt_logprobs"]
    expected = score_prompt(MODEL, PROMPT, 2)
    assert reported[0] is None and len(reported) == len(PROMPT)
    for position, scored in zip(reported[1:], expected[1:], strict=True):
        assert scored is not None
        assert position[str(scored.token_id)]["logprob"] == approx32(scored.logprob)
        assert position[str(scored.token_id)]["rank"] == scored.rank
        for alt in scored.top:
            assert position[str(alt.token_id)]["logprob"] == approx32(alt.logprob)
    # engine_data keeps the worker's full f64 values and its string keys
    raw = body["nvext"]["engine_data"]["prompt_logprobs"]
    assert raw[1][str(PROMPT[1])]["logprob"] == expected[1].logprob  # type: ignore[union-attr]


def test_chat_prompt_logprobs_top_level(stack: Stack) -> None:
    messages = [{"role": "user", "content": "hello"}]
    response = stack.post(
        "/v1/chat/completions",
        {
            "model": "toy",
            "messages": messages,
            "max_tokens": 2,
            "temperature": 0,
            "prompt_logprobs": 1,
        },
    )
    assert response.status_code == 200, response.text
    prompt_logprobs = response.json()["prompt_logprobs"]
    assert prompt_logprobs[0] is None
    assert len(prompt_logprobs) == len(render_chat(messages))


def test_engine_data_carries_the_rl_payload(stack: Stack) -> None:
    body = stack.completion(
        prompt=PROMPT,
        max_tokens=5,
        temperature=0,
        logprobs=0,
        ignore_eos=True,
        nvext={"extra_fields": ["engine_data", "completion_token_ids"]},
    )
    data = body["nvext"]["engine_data"]
    expected = _expected(PROMPT, 5, temperature=0, ignore_eos=True)
    assert (
        data["completion_token_ids"] == expected.token_ids == body["nvext"]["completion_token_ids"]
    )
    assert data["completion_logprobs"] == pytest.approx(expected.logprobs, rel=1e-12)
    assert data["prompt_token_ids"] == PROMPT
    assert data["weight_version"] is None and data["finished"] is True


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_n2_seeded_choices(stack: Stack, path: str) -> None:
    body: dict[str, Any] = {
        "model": "toy",
        "max_tokens": 5,
        "temperature": 1.0,
        "seed": 11,
        "n": 2,
        "ignore_eos": True,
    }
    if path == "/v1/completions":
        body["prompt"] = PROMPT
    else:
        body["messages"] = [{"role": "user", "content": "hello"}]
    first = stack.post(path, body).json()
    again = stack.post(path, body).json()
    assert [c["index"] for c in first["choices"]] == [0, 1]
    assert first["usage"]["completion_tokens"] == 10
    texts = [c.get("text", c.get("message", {}).get("content")) for c in first["choices"]]
    assert texts == [c.get("text", c.get("message", {}).get("content")) for c in again["choices"]]
    prompt = PROMPT if path == "/v1/completions" else render_chat(body["messages"])
    for index, text in enumerate(texts):
        params = SamplingParams(max_tokens=5, temperature=1.0, seed=11, ignore_eos=True)
        assert text == decode(generate_choice(MODEL, prompt, params, index).token_ids)


def test_streaming_matches_non_streaming(stack: Stack) -> None:
    request = {
        "model": "toy",
        "prompt": PROMPT,
        "max_tokens": 6,
        "temperature": 0,
        "logprobs": 1,
        "ignore_eos": True,
    }
    whole = stack.completion(**{k: v for k, v in request.items() if k != "model"})
    events = stack.stream(
        "/v1/completions", {**request, "stream": True, "stream_options": {"include_usage": True}}
    )
    assert events[-1] == "[DONE]"
    chunks = [e for e in events[:-1] if e["choices"]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    logprobs = [lp for c in chunks for lp in c["choices"][0]["logprobs"]["token_logprobs"]]
    assert logprobs == whole["choices"][0]["logprobs"]["token_logprobs"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["usage"]["completion_tokens"] == 6


def test_chat_stream_n2_interleaves_by_index(stack: Stack) -> None:
    events = stack.stream(
        "/v1/chat/completions",
        {
            "model": "toy",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 3,
            "n": 2,
            "temperature": 1.0,
            "seed": 3,
            "ignore_eos": True,
            "stream": True,
        },
    )
    indices = [e["choices"][0]["index"] for e in events[:-1] if e["choices"]]
    assert sorted(set(indices)) == [0, 1] and indices.count(0) == indices.count(1) == 3


def test_sglang_generate_native_stream(stack: Stack) -> None:
    events = stack.stream(
        "/generate",
        {
            "model": "toy",
            "stream": True,
            "return_logprob": True,
            "logprob_start_len": 0,
            "top_logprobs_num": 1,
            "input_ids": PROMPT,
            "sampling_params": {"max_new_tokens": 3, "temperature": 0},
        },
    )
    assert events[-1] == "[DONE]"
    objects = events[:-1]
    expected = _expected(PROMPT, 3, top_k=1, temperature=0)
    assert [o["output_ids"] for o in objects] == [expected.token_ids[: i + 1] for i in range(3)]
    assert objects[-1]["text"] == decode(expected.token_ids)
    meta = objects[-1]["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 3}
    assert meta["completion_tokens"] == 3 and meta["prompt_tokens"] == 4
    assert [t[1] for t in meta["output_token_logprobs"]] == expected.token_ids
    assert [t[0] for t in meta["output_token_logprobs"]] == pytest.approx(expected.logprobs)
    inputs = meta["input_token_logprobs"]
    assert inputs[0] == [None, PROMPT[0], None]
    assert [t[1] for t in inputs] == PROMPT and all(t[0] is not None for t in inputs[1:])
    assert meta["weight_version"] == "default"


def test_vllm_inference_v1_generate(stack: Stack) -> None:
    response = stack.post(
        "/inference/v1/generate",
        {
            "model": "toy",
            "token_ids": PROMPT,
            "sampling_params": {
                "max_tokens": 3,
                "temperature": 0,
                "logprobs": 1,
                "prompt_logprobs": 1,
            },
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    expected = _expected(PROMPT, 3, temperature=0)
    (choice,) = body["choices"]
    assert choice["token_ids"] == expected.token_ids
    assert [c["token"] for c in choice["logprobs"]["content"]] == [
        f"token_id:{t}" for t in expected.token_ids
    ]
    assert body["prompt_logprobs"][0] is None and len(body["prompt_logprobs"]) == 4


def test_rl_workers_lists_the_worker(stack: Stack) -> None:
    (worker,) = stack.workers()
    assert worker["model"] == "toy"
    assert worker["routes"] == VLLM_RL_ROUTES
    assert worker["request_plane_url"] == "dyn://dynamo.backend.rl"
    assert worker["world_size"] == 1 and "error" not in worker
    assert worker["system_url"].startswith("http://127.0.0.1:")
    health = stack.http.get(worker["system_url"] + "/health")
    assert health.status_code == 200
    assert json.loads(health.text)["status"] == "ready"
    assert stack.admin("liveness_probe") == {"status": "ok", "alive": True}


def test_worker_received_preprocessed_requests(stack: Stack) -> None:
    """The worker log holds what the frontend sent; spot-check the canonical fields."""
    stack.completion(prompt=PROMPT, max_tokens=2, logprobs=3, prompt_logprobs=1)
    _, request = stack.logged_requests()[-1]
    assert request["token_ids"] == PROMPT
    assert request["output_options"]["logprobs"] == 3
    assert request["output_options"]["prompt_logprobs"] == 1
    assert request["stop_conditions"]["stop_token_ids_hidden"] == [EOS_ID]
