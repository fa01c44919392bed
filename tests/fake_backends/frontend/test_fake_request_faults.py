"""The request-handling faults of the catalogue: invalid requests accepted, a JSON body cut short,
the request id not echoed, a stream answered as one body, negative input tokens accepted, token
ids wrapped instead of refused, and the context window left unchecked."""

from __future__ import annotations

import json

import httpx
import pytest
from fake_backend_helpers import (
    DONE,
    IDS,
    PROMPT,
    chat,
    completions,
    faulted,
    generate,
    parse_sse,
    shows,
)

from fake_backends.deployment.assembly import FakeDeployment


@shows("validation_accepted")
def test_validation_accepted(client: httpx.Client, any_backend: FakeDeployment) -> None:
    clean = completions(client, any_backend, prompt=PROMPT, max_tokens=2, n=2, nvext=IDS)
    assert clean.status_code == 400
    assert set(clean.json()) == {"message", "type", "code"}
    assert clean.json()["message"].startswith("Validation: ")
    with faulted(any_backend, "validation_accepted"):
        accepted = completions(client, any_backend, prompt=PROMPT, max_tokens=2, n=2, nvext=IDS)
    assert accepted.status_code == 200
    assert [c["index"] for c in accepted.json()["choices"]] == [0, 1]


@shows("invalid_json_body")
def test_invalid_json_body(client: httpx.Client, any_backend: FakeDeployment) -> None:
    pinned = {"backend_instance_id": any_backend.workers[0]["instance_id"]}
    clean = chat(client, any_backend, max_tokens=3, temperature=0, nvext=pinned)
    with faulted(any_backend, "invalid_json_body"):
        cut = chat(client, any_backend, max_tokens=3, temperature=0, nvext=pinned)
        streamed = parse_sse(chat(client, any_backend, max_tokens=3, stream=True).text)
        other = completions(client, any_backend, prompt=PROMPT, max_tokens=3)
    assert clean.json()["object"] == "chat.completion"
    assert cut.status_code == 200 and cut.headers["content-type"] == "application/json"
    assert len(cut.text) == len(clean.text) // 2
    after_id = len('{"id":"') + len(clean.json()["id"])  # the same body but for its id
    assert cut.text[after_id:] == clean.text[after_id : len(cut.text)]
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut.text)
    assert streamed[-1] == DONE and other.json()["object"] == "text_completion"


@shows("request_id_not_echoed")
def test_request_id_not_echoed(client: httpx.Client, any_backend: FakeDeployment) -> None:
    def replies(request_id: str) -> list[httpx.Response]:
        headers = {"x-request-id": request_id}
        url = any_backend.frontend_url
        body = {"model": "toy", "prompt": PROMPT, "max_tokens": 2}
        return [
            client.post(f"{url}/v1/completions", json=body, headers=headers),
            client.post(f"{url}/v1/completions", json={**body, "stream": True}, headers=headers),
            client.post(f"{url}/v1/completions", json={**body, "n": 0}, headers=headers),
            client.get(f"{url}/v1/models", headers=headers),
        ]

    assert [r.headers.get("x-request-id") for r in replies("echoed")] == ["echoed"] * 4
    with faulted(any_backend, "request_id_not_echoed"):
        silent = replies("not-echoed")
    assert [r.status_code for r in silent] == [200, 200, 400, 200]
    assert all("x-request-id" not in r.headers for r in silent)
    assert "not-echoed" in {r.attempt_id for r in any_backend.request_ledger}  # still used


@shows("stream_answered_unary")
def test_stream_answered_unary(client: httpx.Client, any_backend: FakeDeployment) -> None:
    body = {"model": "toy", "prompt": PROMPT, "max_tokens": 2, "stream": True}
    url = f"{any_backend.frontend_url}/v1/completions"
    assert client.post(url, json=body).headers["content-type"].startswith("text/event-stream")
    with faulted(any_backend, "stream_answered_unary"):
        reply = client.post(url, json=body)
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.json()["choices"][0]["finish_reason"] == "length"


@shows("input_tokens_negative")
def test_input_tokens_negative(client: httpx.Client, any_backend: FakeDeployment) -> None:
    url = f"{any_backend.frontend_url}/v1/responses/input_tokens"
    body = {"model": "toy", "input": "hello world"}
    assert client.post(url, json=body).json() == {
        "object": "response.input_tokens",
        "input_tokens": 5,
    }
    with faulted(any_backend, "input_tokens_negative"):
        reply = client.post(url, json=body)
        invalid = client.post(url, json={"input": 3})
    assert reply.status_code == 200
    assert reply.json() == {"object": "response.input_tokens", "input_tokens": -1}
    assert invalid.status_code == 400  # validation is unchanged


@shows("token_ids_wrapped")
def test_token_ids_wrapped(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    prompt = [*PROMPT, 2**31 - 1]
    assert completions(client, vllm, prompt=prompt, max_tokens=2).status_code == 400
    native = {"input_ids": prompt, "sampling_params": {"max_new_tokens": 2}}
    refused = generate(client, sglang, **native)
    assert refused.status_code == 400
    assert refused.json()["message"] == (
        f"Token id {2**31 - 1} is out of vocabulary at input_ids[{len(PROMPT)}]"
    )
    with faulted(vllm, "token_ids_wrapped"):
        assert completions(client, vllm, prompt=prompt, max_tokens=2).status_code == 200
    with faulted(sglang, "token_ids_wrapped"):
        assert generate(client, sglang, **native).status_code == 200


@shows("context_window_unchecked")
def test_context_window_unchecked(client: httpx.Client, vllm: FakeDeployment) -> None:
    beyond = {"model": "toy", "prompt": PROMPT, "max_tokens": 4096, "temperature": 0}
    refused = completions(client, vllm, **beyond)
    assert refused.status_code == 400
    assert refused.json()["details"]["type"] == "context_length"
    with faulted(vllm, "context_window_unchecked"):
        assert completions(client, vllm, **beyond).status_code == 200
