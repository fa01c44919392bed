"""The stream-level data faults: a usage chunk that miscounts, short chat top-k lists, streamed
choices under each other's index, a stop-string finish without the token that completed it."""

from __future__ import annotations

from typing import Any

import httpx
from fake_backend_helpers import PROMPT, chat, completions, faulted, parse_sse, shows, stream_chunks

from fake_backends.deployment.assembly import FakeDeployment

IDS = {"extra_fields": ["completion_token_ids", "stop_reason"]}


def _events(reply: httpx.Response) -> list[dict[str, Any]]:
    return stream_chunks(parse_sse(reply.text))


@shows("usage_chunk_miscounts")
def test_usage_chunk_miscounts(client: httpx.Client, vllm: FakeDeployment) -> None:
    request = {"prompt": PROMPT, "max_tokens": 3, "temperature": 0, "nvext": IDS}
    with faulted(vllm, "usage_chunk_miscounts"):
        unary = completions(client, vllm, **request).json()
        chunks = _events(
            completions(
                client, vllm, stream=True, stream_options={"include_usage": True}, **request
            )
        )
    streamed = sum(len(c.get("nvext", {}).get("completion_token_ids", [])) for c in chunks)
    assert unary["usage"]["completion_tokens"] == streamed == 3
    assert chunks[-1]["usage"]["completion_tokens"] == 4
    assert chunks[-1]["usage"]["total_tokens"] == len(PROMPT) + 4


@shows("chat_top_logprobs_short")
def test_chat_top_logprobs_short(client: httpx.Client, vllm: FakeDeployment) -> None:
    request = {"max_tokens": 2, "temperature": 0, "logprobs": True, "top_logprobs": 3}
    clean = chat(client, vllm, **request).json()["choices"][0]["logprobs"]["content"]
    with faulted(vllm, "chat_top_logprobs_short"):
        short = chat(client, vllm, **request).json()["choices"][0]["logprobs"]["content"]
        completion = completions(
            client, vllm, prompt=PROMPT, max_tokens=2, temperature=0, logprobs=3
        ).json()
    assert [len(entry["top_logprobs"]) for entry in clean] == [3, 3]
    assert [len(entry["top_logprobs"]) for entry in short] == [2, 2]
    assert short[0]["top_logprobs"][0]["token"] == short[0]["token"]
    assert all(len(top) >= 3 for top in completion["choices"][0]["logprobs"]["top_logprobs"])


@shows("stream_index_swapped")
def test_stream_index_swapped(client: httpx.Client, vllm: FakeDeployment) -> None:
    request = {"prompt": PROMPT, "max_tokens": 4, "n": 2, "temperature": 0.8, "seed": 7}
    unary = completions(client, vllm, **request).json()["choices"]
    with faulted(vllm, "stream_index_swapped"):
        chunks = _events(completions(client, vllm, stream=True, **request))
    texts = {0: "", 1: ""}
    for chunk in chunks:
        for choice in chunk["choices"]:
            texts[choice["index"]] += choice["text"]
    assert unary[0]["text"] != unary[1]["text"]
    assert (texts[0], texts[1]) == (unary[1]["text"], unary[0]["text"])


@shows("stop_string_drops_last_id")
def test_stop_string_drops_last_id(client: httpx.Client, vllm: FakeDeployment) -> None:
    greedy = {"prompt": PROMPT, "max_tokens": 8, "temperature": 0, "nvext": IDS}
    text = completions(client, vllm, **greedy).json()["choices"][0]["text"]
    stop = {**greedy, "stop": [text[len(text) // 2 : len(text) // 2 + 2]], "logprobs": 0}
    clean = completions(client, vllm, **stop).json()
    with faulted(vllm, "stop_string_drops_last_id"):
        body = completions(client, vllm, **stop).json()
    ids = clean["nvext"]["completion_token_ids"]
    assert clean["choices"][0]["finish_reason"] == body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["text"] == clean["choices"][0]["text"]
    assert body["nvext"]["completion_token_ids"] == ids[:-1]
    assert len(body["choices"][0]["logprobs"]["token_logprobs"]) == len(ids) - 1
    assert body["usage"]["completion_tokens"] == len(ids) - 1
