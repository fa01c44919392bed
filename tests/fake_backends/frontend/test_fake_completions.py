"""``/v1/completions`` shapes, streaming framing and nvext placement (all personalities)."""

from __future__ import annotations

from typing import Any

import httpx
from fake_backend_helpers import ALL_SELECTORS, DONE, PROMPT, completions, parse_sse, stream_chunks

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.model.tokenizer import EOS_ID, encode


def _counts(usage: dict[str, Any]) -> tuple[int, int, int]:
    return usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]


def _check_cache_details(dep: FakeDeployment, usage: dict[str, Any]) -> None:
    """vLLM/SGLang report prefix-cache hits (a 5-token prompt never fills a block)."""
    if dep.backend == "trtllm":
        assert "prompt_tokens_details" not in usage
    else:
        assert usage["prompt_tokens_details"] == {"audio_tokens": None, "cached_tokens": 0}


def test_non_stream_shape(client: httpx.Client, any_backend: FakeDeployment) -> None:
    r = completions(client, any_backend, prompt=PROMPT, max_tokens=5, logprobs=2)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["id"].startswith("cmpl-") and body["object"] == "text_completion"
    assert isinstance(body["created"], int) and body["model"] == "toy"
    assert "nvext" not in body  # nothing selected
    assert list(body) == [
        "id",
        "choices",
        "created",
        "model",
        "system_fingerprint",
        "object",
        "usage",
    ]
    assert body["system_fingerprint"] is None
    (choice,) = body["choices"]
    assert list(choice) == ["text", "index", "logprobs", "finish_reason"]
    assert choice["index"] == 0 and choice["finish_reason"] == "length"
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 5
    assert lp["text_offset"] == []
    assert "".join(lp["tokens"]) == choice["text"]
    for position, entries in enumerate(lp["top_logprobs"]):
        assert isinstance(entries, dict) and 2 <= len(entries) <= 3
        assert lp["tokens"][position] in entries
        assert all(v <= 0 for v in entries.values())
    assert _counts(body["usage"]) == (5, 5, 10)
    _check_cache_details(any_backend, body["usage"])
    # recorded 1.6.1: without logprobs the key is absent, not null
    plain = completions(client, any_backend, prompt=PROMPT, max_tokens=2).json()
    assert list(plain["choices"][0]) == ["text", "index", "finish_reason"]


def test_nvext_fields_at_response_level(client: httpx.Client, vllm: FakeDeployment) -> None:
    r = completions(
        client,
        vllm,
        prompt=PROMPT,
        max_tokens=6,
        logprobs=0,
        prompt_logprobs=1,
        nvext={"extra_fields": [*ALL_SELECTORS, "not_a_selector"]},
    )
    body = r.json()
    nv = body["nvext"]
    assert "nvext" not in body["choices"][0]
    ids = nv["completion_token_ids"]
    assert len(ids) == 6 and nv["prompt_token_ids"] == PROMPT
    assert nv["engine_data"]["completion_token_ids"] == ids
    assert nv["engine_data"]["prompt_token_ids"] == PROMPT
    assert nv["engine_data"]["finished"] is True and nv["engine_data"]["weight_version"] is None
    engine_lps = nv["engine_data"]["completion_logprobs"]
    token_lps = body["choices"][0]["logprobs"]["token_logprobs"]
    assert len(engine_lps) == len(token_lps) == 6
    assert all(abs(a - b) < 1e-6 for a, b in zip(engine_lps, token_lps, strict=True))
    prompt_lps = nv["prompt_logprobs"]
    assert len(prompt_lps) == len(PROMPT) and prompt_lps[0] is None
    for token, entry in zip(PROMPT[1:], prompt_lps[1:], strict=True):
        assert str(token) in entry and all(key.isdigit() for key in entry)
        assert set(entry[str(token)]) == {"logprob", "rank"}  # real vLLM: no decoded_token
    assert nv["detailed_finish_reason"] == "length" and "stop_reason" not in nv
    assert set(nv["timing"]) == {
        "request_received_ms",
        "prefill_wait_time_ms",
        "prefill_time_ms",
        "ttft_ms",
        "total_time_ms",
    }
    assert nv["engine_data"]["prompt_logprobs"][0] is None
    assert nv["worker_id"]["decode_worker_id"] in {w["instance_id"] for w in vllm.workers}


def test_logprobs_zero_lists_the_sampled_token(client: httpx.Client, vllm: FakeDeployment) -> None:
    r = completions(client, vllm, prompt=PROMPT, max_tokens=3, logprobs=0, temperature=1.0, seed=3)
    lp = r.json()["choices"][0]["logprobs"]
    assert [list(d) for d in lp["top_logprobs"]] == [[t] for t in lp["tokens"]]


def test_text_prompt_equals_its_token_ids(
    client: httpx.Client, any_backend: FakeDeployment
) -> None:
    text = "the quick brown fox"
    fields = {"extra_fields": ["completion_token_ids", "prompt_token_ids"]}
    by_text = completions(client, any_backend, prompt=text, max_tokens=8, nvext=fields).json()
    by_ids = completions(
        client, any_backend, prompt=encode(text), max_tokens=8, nvext=fields
    ).json()
    assert by_text["nvext"] == by_ids["nvext"]
    assert by_text["nvext"]["prompt_token_ids"] == encode(text)
    assert by_text["choices"] == by_ids["choices"]


def test_token_data_replaces_the_prompt(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = ["completion_token_ids", "prompt_token_ids"]
    direct = completions(
        client, vllm, prompt=PROMPT, max_tokens=4, nvext={"extra_fields": fields}
    ).json()
    # A prompt is still required, and an empty one refused (real 1.6.1); token_data wins.
    via = completions(
        client, vllm, prompt="x", max_tokens=4, nvext={"token_data": PROMPT, "extra_fields": fields}
    ).json()
    assert via["nvext"] == direct["nvext"]


def test_eos_and_stop_string_keep_their_token(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["completion_token_ids", "stop_reason", "detailed_finish_reason"]}
    eos = completions(client, vllm, prompt=PROMPT, max_tokens=64, logprobs=0, nvext=fields).json()
    choice, nv = eos["choices"][0], eos["nvext"]
    assert choice["finish_reason"] == "stop" and nv["detailed_finish_reason"] == "stop"  # recorded
    assert nv["stop_reason"] == EOS_ID and nv["completion_token_ids"][-1] == EOS_ID
    assert choice["logprobs"]["tokens"][-1] == ""
    assert set(choice["logprobs"]["top_logprobs"][-1]) == {"</s>", ""}  # CONTRACT-NOTES §O6.2
    assert eos["usage"]["completion_tokens"] == len(nv["completion_token_ids"])

    full = completions(client, vllm, prompt=PROMPT, max_tokens=10, nvext=fields).json()
    stop = full["choices"][0]["text"][7:10]
    cut = completions(client, vllm, prompt=PROMPT, max_tokens=10, stop=[stop], nvext=fields)
    body = cut.json()
    assert body["choices"][0]["finish_reason"] == "stop" and body["nvext"]["stop_reason"] == stop
    assert body["nvext"]["detailed_finish_reason"] == "stop"
    assert full["choices"][0]["text"].startswith(body["choices"][0]["text"] + stop)
    ids = body["nvext"]["completion_token_ids"]
    assert ids == full["nvext"]["completion_token_ids"][: len(ids)]
    assert body["usage"]["completion_tokens"] == len(ids)


def test_stream_framing_and_chunks(client: httpx.Client, any_backend: FakeDeployment) -> None:
    r = completions(
        client,
        any_backend,
        prompt=PROMPT,
        max_tokens=4,
        logprobs=1,
        stream=True,
        stream_options={"include_usage": True},
        nvext={
            "extra_fields": ["completion_token_ids", "detailed_finish_reason", "prompt_token_ids"]
        },
    )
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
    events = parse_sse(r.text)
    assert events[-1] == DONE and events.count(DONE) == 1
    chunks = stream_chunks(events)
    *tokens, usage = chunks
    assert len(tokens) == 4
    assert usage["choices"] == [] and "nvext" not in usage
    assert _counts(usage["usage"]) == (5, 4, 9)
    _check_cache_details(any_backend, usage["usage"])
    for chunk in tokens:
        assert chunk["object"] == "text_completion" and chunk["id"] == tokens[0]["id"]
        assert chunk["usage"] is None and chunk["system_fingerprint"] is None
        (choice,) = chunk["choices"]
        assert len(chunk["nvext"]["completion_token_ids"]) == 1
        assert len(choice["logprobs"]["token_logprobs"]) == 1
    # recorded 1.6.1: non-final chunks omit finish_reason
    assert ["finish_reason" in c["choices"][0] for c in tokens] == [False, False, False, True]
    assert tokens[-1]["choices"][0]["finish_reason"] == "length"
    assert "prompt_token_ids" not in tokens[0]["nvext"]
    assert tokens[-1]["nvext"]["prompt_token_ids"] == PROMPT
    assert tokens[-1]["nvext"]["detailed_finish_reason"] == "length"
    whole = completions(
        client,
        any_backend,
        prompt=PROMPT,
        max_tokens=4,
        nvext={"extra_fields": ["completion_token_ids"]},
    ).json()
    streamed_ids = [i for c in tokens for i in c["nvext"]["completion_token_ids"]]
    assert streamed_ids == whole["nvext"]["completion_token_ids"]
    assert "".join(c["choices"][0]["text"] for c in tokens) == whole["choices"][0]["text"]


def test_stream_n2_interleaves(client: httpx.Client, vllm: FakeDeployment) -> None:
    r = completions(
        client, vllm, prompt=PROMPT, max_tokens=3, n=2, temperature=1.0, seed=11, stream=True
    )
    chunks = stream_chunks(parse_sse(r.text))
    assert [c["choices"][0]["index"] for c in chunks] == [0, 1, 0, 1, 0, 1]
    body = completions(
        client, vllm, prompt=PROMPT, max_tokens=3, n=2, temperature=1.0, seed=11
    ).json()
    assert [c["index"] for c in body["choices"]] == [0, 1]
    for index in (0, 1):
        text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"][0]["index"] == index)
        assert text == body["choices"][index]["text"]
    assert body["usage"]["completion_tokens"] == 6


def test_prompt_logprobs_need_the_opt_in_and_echo_is_ignored(
    client: httpx.Client, vllm: FakeDeployment
) -> None:
    plain = completions(
        client, vllm, prompt=PROMPT, max_tokens=2, prompt_logprobs=1, echo=True
    ).json()
    assert "nvext" not in plain and "prompt_logprobs" not in plain
    reference = completions(client, vllm, prompt=PROMPT, max_tokens=2).json()
    assert plain["choices"][0] == reference["choices"][0]  # no prompt echoed
    # echo alone still makes the engine compute prompt logprobs (k=1), visible via the opt-in
    echoed = completions(
        client,
        vllm,
        prompt=PROMPT,
        max_tokens=2,
        echo=True,
        nvext={"extra_fields": ["prompt_logprobs"]},
    ).json()
    assert len(echoed["nvext"]["prompt_logprobs"]) == len(PROMPT)
    assert all(len(entry) <= 2 for entry in echoed["nvext"]["prompt_logprobs"][1:])


def test_trtllm_has_no_prompt_logprobs(client: httpx.Client, trtllm: FakeDeployment) -> None:
    body = completions(
        client,
        trtllm,
        prompt=PROMPT,
        max_tokens=2,
        prompt_logprobs=1,
        nvext={"extra_fields": ["prompt_logprobs", "completion_token_ids"]},
    ).json()
    assert (
        "prompt_logprobs" not in body["nvext"] and len(body["nvext"]["completion_token_ids"]) == 2
    )


def test_pinned_worker_and_weights(client: httpx.Client, vllm: FakeDeployment) -> None:
    second = vllm.workers[1]["instance_id"]
    fields = ["completion_token_ids", "worker_id", "engine_data"]
    nvext = {"backend_instance_id": second, "extra_fields": fields}
    before = completions(client, vllm, prompt=PROMPT, max_tokens=4, nvext=nvext).json()["nvext"]
    assert before["worker_id"] == {"prefill_worker_id": second, "decode_worker_id": second}
    worker = vllm.state.workers[1]
    try:
        worker.load_weights("step-1")
        after = completions(client, vllm, prompt=PROMPT, max_tokens=4, nvext=nvext).json()["nvext"]
    finally:
        worker.load_weights("initial")
    assert after["completion_token_ids"] != before["completion_token_ids"]


def test_ignore_eos_clears_every_stop_condition(client: httpx.Client, vllm: FakeDeployment) -> None:
    """As the real 1.6.1 frontend does (StopConditions::apply_ignore_eos; measured with its own
    engine behind it: a stop string or stop id the greedy text reaches does not stop it)."""
    fields = {"extra_fields": ["completion_token_ids"]}
    greedy = {
        "model": "toy",
        "prompt": PROMPT,
        "max_tokens": 8,
        "temperature": 0,
        "ignore_eos": True,
    }
    full = completions(client, vllm, nvext=fields, **greedy).json()
    ids = full["nvext"]["completion_token_ids"]
    for stop in ({"stop": [full["choices"][0]["text"][4:7]]}, {"stop_token_ids": [ids[2]]}):
        body = completions(client, vllm, nvext=fields, **greedy, **stop).json()
        assert body["choices"][0]["finish_reason"] == "length"
        assert body["nvext"]["completion_token_ids"] == ids
