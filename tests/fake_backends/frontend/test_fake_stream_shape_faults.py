"""The stream-shape faults of the catalogue: two terminals for one choice, no [DONE], content after
a terminal, and a stream cut short."""

from __future__ import annotations

import httpx
from fake_backend_helpers import (
    DONE,
    PROMPT,
    chat,
    faulted,
    parse_sse,
    sglang_final,
    shows,
    stream_chunks,
    stream_events,
)

from fake_backends.deployment.assembly import FakeDeployment


@shows("double_terminal")
def test_double_terminal(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    with faulted(vllm, "double_terminal"), faulted(sglang, "double_terminal"):
        chunks = stream_chunks(
            stream_events(client, vllm, prompt=PROMPT, max_tokens=3, n=2, temperature=1.0, seed=2)
        )
        sg_events, _ = sglang_final(client, sglang)
    for index in (0, 1):
        terminals = [
            c
            for c in chunks
            if c["choices"][0]["index"] == index and c["choices"][0].get("finish_reason")
        ]
        assert len(terminals) == 2 and terminals[0] == terminals[1]
    finals = [e for e in stream_chunks(sg_events) if e["meta_info"]["finish_reason"]]
    assert len(finals) == 2


@shows("done_missing")
def test_done_missing(client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment) -> None:
    with faulted(vllm, "done_missing"), faulted(sglang, "done_missing"):
        events = stream_events(client, vllm, prompt=PROMPT, max_tokens=2)
        sg_events, _ = sglang_final(client, sglang)
    assert DONE not in events and events[-1]["choices"][0].get("finish_reason") == "length"
    assert DONE not in sg_events


@shows("content_after_terminal")
def test_content_after_terminal(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    with faulted(vllm, "content_after_terminal"), faulted(sglang, "content_after_terminal"):
        chunks = stream_chunks(stream_events(client, vllm, prompt=PROMPT, max_tokens=2))
        chat_chunks = stream_chunks(parse_sse(chat(client, vllm, max_tokens=2, stream=True).text))
        sg_events, _ = sglang_final(client, sglang)
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert (
        chunks[-1]["choices"][0].get("finish_reason") is None and chunks[-1]["choices"][0]["text"]
    )
    assert chat_chunks[-1]["choices"][0]["delta"]["content"]
    sg_chunks = stream_chunks(sg_events)
    assert (
        sg_chunks[-2]["meta_info"]["finish_reason"]
        and sg_chunks[-1]["meta_info"]["finish_reason"] is None
    )


@shows("stream_truncated")
def test_stream_truncated(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    with faulted(vllm, "stream_truncated"), faulted(sglang, "stream_truncated"):
        events = stream_events(client, vllm, prompt=PROMPT, max_tokens=1)
        chat_events = parse_sse(chat(client, vllm, max_tokens=4, stream=True).text)
        sg_events, _ = sglang_final(client, sglang)
    assert len(events) == 1 and "finish_reason" not in events[0]["choices"][0]
    assert len(chat_events) == 1 and chat_events[0]["choices"][0]["finish_reason"] is None
    assert len(sg_events) == 1 and sg_events[0]["meta_info"]["finish_reason"] is None
