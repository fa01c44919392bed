"""The response faults of the catalogue: the wrong number of choices, a finish reason missing,
unknown, misreported as stop or silently cancelled, a matched stop id dropped, stop_reason in the
choices, usage that miscounts, and a model identity that is not the one asked for."""

from __future__ import annotations

import httpx
from fake_backend_helpers import (
    IDS,
    PROMPT,
    chat,
    completions,
    faulted,
    parse_sse,
    sglang_final,
    shows,
    stream_chunks,
    stream_events,
)

from fake_backends.deployment.assembly import FakeDeployment


@shows("wrong_choice_count")
def test_wrong_choice_count(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "wrong_choice_count"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=2).json()
        chat_body = chat(client, vllm, max_tokens=2, n=2).json()
        chunks = stream_chunks(stream_events(client, vllm, prompt=PROMPT, max_tokens=2))
    assert [c["index"] for c in body["choices"]] == [0, 1]
    assert len(chat_body["choices"]) == 3
    assert {c["choices"][0]["index"] for c in chunks} == {0, 1}


@shows("finish_reason_missing")
def test_finish_reason_missing(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    with faulted(vllm, "finish_reason_missing"), faulted(sglang, "finish_reason_missing"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=2).json()
        chunks = stream_chunks(parse_sse(chat(client, vllm, max_tokens=2, stream=True).text))
        _, sg = sglang_final(client, sglang)
        completion_chunks = stream_chunks(stream_events(client, vllm, prompt=PROMPT, max_tokens=2))
    assert body["choices"][0]["finish_reason"] is None
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    assert [c["choices"][0].get("finish_reason", "absent") for c in completion_chunks] == [
        "absent",
        None,
    ]
    assert sg["meta_info"]["finish_reason"] is None


@shows("unknown_finish_reason")
def test_unknown_finish_reason(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    with faulted(vllm, "unknown_finish_reason"), faulted(sglang, "unknown_finish_reason"):
        body = chat(client, vllm, max_tokens=2).json()
        chunks = stream_chunks(stream_events(client, vllm, prompt=PROMPT, max_tokens=2))
        _, sg = sglang_final(client, sglang)
    assert body["choices"][0]["finish_reason"] == "weird_reason"
    assert chunks[-1]["choices"][0]["finish_reason"] == "weird_reason"
    assert sg["meta_info"]["finish_reason"] == {"type": "weird_reason"}


@shows("length_reported_as_stop")
def test_length_reported_as_stop(client: httpx.Client, vllm: FakeDeployment) -> None:
    greedy = {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "ignore_eos": True}
    assert completions(client, vllm, **greedy).json()["choices"][0]["finish_reason"] == "length"
    with faulted(vllm, "length_reported_as_stop"):
        body = completions(client, vllm, **greedy).json()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 4


@shows("silent_cancellation")
def test_silent_cancellation(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["detailed_finish_reason"]}
    clean = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields).json()
    with faulted(vllm, "silent_cancellation"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields).json()
    assert clean["nvext"]["detailed_finish_reason"] == "length"
    assert body["choices"][0]["finish_reason"] == clean["choices"][0]["finish_reason"]
    assert body["nvext"]["detailed_finish_reason"] == "cancelled"


@shows("matched_stop_id_dropped")
def test_matched_stop_id_dropped(client: httpx.Client, vllm: FakeDeployment) -> None:
    greedy = {"prompt": PROMPT, "max_tokens": 6, "temperature": 0}
    fields = {"extra_fields": ["completion_token_ids", "stop_reason"]}
    ids = completions(client, vllm, nvext=fields, **greedy).json()["nvext"]["completion_token_ids"]
    stop = {**greedy, "stop_token_ids": [ids[1]]}
    clean = completions(client, vllm, nvext=fields, **stop).json()
    with faulted(vllm, "matched_stop_id_dropped"):
        body = completions(client, vllm, nvext=fields, **stop).json()
    assert clean["nvext"]["completion_token_ids"] == ids[:2]
    assert body["nvext"]["completion_token_ids"] == ids[:1]
    assert body["usage"]["completion_tokens"] == 1 and body["choices"][0]["finish_reason"] == "stop"
    assert body["nvext"]["stop_reason"] == ids[1]


@shows("stop_reason_in_choices")
def test_stop_reason_in_choices(client: httpx.Client, vllm: FakeDeployment) -> None:
    body = {"prompt": PROMPT, "max_tokens": 24, "stop": ["e", "the", "a"], "nvext": IDS}
    clean = completions(client, vllm, **body).json()
    assert "stop_reason" not in clean["choices"][0] and "stop_reason" not in clean["nvext"]
    with faulted(vllm, "stop_reason_in_choices"):
        leaked = completions(client, vllm, **body).json()
        streamed = stream_events(client, vllm, **body)
    assert "stop_reason" in leaked["choices"][0]
    finals = [
        c for c in stream_chunks(streamed) if c["choices"] and c["choices"][0].get("finish_reason")
    ]
    assert "stop_reason" in finals[-1]["choices"][0]


@shows("usage_counts_wrong")
def test_usage_counts_wrong(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "usage_counts_wrong"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=3).json()
        usage = stream_chunks(
            stream_events(
                client, vllm, prompt=PROMPT, max_tokens=3, stream_options={"include_usage": True}
            )
        )[-1]["usage"]
    for got in (body["usage"], usage):
        assert (got["prompt_tokens"], got["completion_tokens"], got["total_tokens"]) == (5, 4, 9)


@shows("model_identity_mismatch")
def test_model_identity_mismatch(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "model_identity_mismatch"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=1).json()
        listed = client.get(f"{vllm.frontend_url}/v1/models").json()["data"][0]["id"]
        chunks = stream_chunks(parse_sse(chat(client, vllm, max_tokens=1, stream=True).text))
    assert body["model"] == "other-model" and listed == "toy"
    assert {c["model"] for c in chunks} == {"other-model"}
