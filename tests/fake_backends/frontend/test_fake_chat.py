"""``/v1/chat/completions``: shapes, role chunk, logprobs and prompt-logprob placement."""

from __future__ import annotations

import httpx
from fake_backend_helpers import DONE, PROMPT, chat, parse_sse, stream_chunks

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.model.tokenizer import render_chat


def test_non_stream_shape(client: httpx.Client, any_backend: FakeDeployment) -> None:
    r = chat(client, any_backend, max_tokens=4, logprobs=True, top_logprobs=2)
    assert r.status_code == 200
    body = r.json()
    assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert list(body) == ["id", "choices", "created", "model", "object", "usage"]
    (choice,) = body["choices"]
    assert list(choice) == ["index", "message", "finish_reason", "logprobs"]
    assert choice["message"]["role"] == "assistant" and choice["message"]["refusal"] is None
    assert isinstance(choice["message"]["content"], str)
    assert choice["logprobs"]["refusal"] is None
    content = choice["logprobs"]["content"]
    assert len(content) == 4
    assert "".join(e["token"] for e in content) == choice["message"]["content"]
    for entry in content:
        assert set(entry) == {"token", "logprob", "token_id", "bytes", "top_logprobs"}
        assert bytes(entry["bytes"]).decode() == entry["token"]
        assert 2 <= len(entry["top_logprobs"]) <= 3
        assert all(set(alt) == {"token", "logprob", "bytes"} for alt in entry["top_logprobs"])
    prompt = render_chat([{"role": "user", "content": "hello there"}])
    assert body["usage"]["prompt_tokens"] == len(prompt)


def test_logprobs_true_without_top_logprobs_gives_one_entry(
    client: httpx.Client, vllm: FakeDeployment
) -> None:
    content = chat(client, vllm, max_tokens=3, logprobs=True).json()["choices"][0]["logprobs"][
        "content"
    ]
    assert [len(e["top_logprobs"]) for e in content] == [1, 1, 1]
    assert chat(client, vllm, max_tokens=3).json()["choices"][0]["logprobs"] is None


def test_prompt_logprobs_placement(client: httpx.Client, vllm: FakeDeployment) -> None:
    plain = chat(client, vllm, max_tokens=2, prompt_logprobs=1).json()
    prompt_len = plain["usage"]["prompt_tokens"]
    assert len(plain["prompt_logprobs"]) == prompt_len and plain["prompt_logprobs"][0] is None
    assert "nvext" not in plain
    both = chat(
        client, vllm, max_tokens=2, prompt_logprobs=1, nvext={"extra_fields": ["prompt_logprobs"]}
    ).json()
    assert len(both["nvext"]["prompt_logprobs"]) == prompt_len and "prompt_logprobs" in both
    streamed = stream_chunks(
        parse_sse(chat(client, vllm, max_tokens=2, prompt_logprobs=1, stream=True).text)
    )
    assert all("nvext" not in c and "prompt_logprobs" not in c for c in streamed)
    opted = stream_chunks(
        parse_sse(
            chat(
                client,
                vllm,
                max_tokens=2,
                prompt_logprobs=1,
                stream=True,
                nvext={"extra_fields": ["prompt_logprobs"]},
            ).text
        )
    )
    assert len(opted[-1]["nvext"]["prompt_logprobs"]) == prompt_len


def test_trtllm_chat_has_no_prompt_logprobs(client: httpx.Client, trtllm: FakeDeployment) -> None:
    body = chat(
        client, trtllm, max_tokens=2, prompt_logprobs=1, nvext={"extra_fields": ["prompt_logprobs"]}
    ).json()
    assert "prompt_logprobs" not in body and "nvext" not in body


def test_stream_chunks(client: httpx.Client, any_backend: FakeDeployment) -> None:
    r = chat(
        client,
        any_backend,
        max_tokens=3,
        logprobs=True,
        stream=True,
        n=2,
        temperature=1.0,
        seed=1,
        stream_options={"include_usage": True},
    )
    assert r.headers["content-type"] == "text/event-stream"
    events = parse_sse(r.text)
    assert events[-1] == DONE
    chunks = stream_chunks(events)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 6
    assert all("usage" not in c for c in chunks[:-1])
    for index in (0, 1):
        mine = [c["choices"][0] for c in chunks[:-1] if c["choices"][0]["index"] == index]
        # recorded 1.6.1: the role rides on the first content chunk; no role-only chunk
        assert mine[0]["delta"]["role"] == "assistant" and mine[0]["delta"]["content"]
        assert all(set(c["delta"]) == {"content"} for c in mine[1:])
        assert [len(c["logprobs"]["content"]) for c in mine] == [1, 1, 1]
        assert all(c["logprobs"]["refusal"] is None for c in mine)
        assert [c["finish_reason"] for c in mine] == [None, None, "length"]


def test_token_data_bypasses_the_template(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["prompt_token_ids", "completion_token_ids"]}
    body = chat(client, vllm, max_tokens=3, nvext={"token_data": PROMPT, **fields}).json()
    assert body["nvext"]["prompt_token_ids"] == PROMPT
    completion = client.post(
        f"{vllm.frontend_url}/v1/completions",
        json={"model": "toy", "prompt": PROMPT, "max_tokens": 3, "nvext": fields},
    ).json()
    assert completion["nvext"]["completion_token_ids"] == body["nvext"]["completion_token_ids"]


def test_max_completion_tokens(client: httpx.Client, vllm: FakeDeployment) -> None:
    body = chat(client, vllm, max_completion_tokens=2, max_tokens=9).json()
    assert body["usage"]["completion_tokens"] == 2
