"""Errors: Dynamo's flat body with the recorded message families, 404s, 415, no model."""

from __future__ import annotations

import httpx
import pytest
from fake_backend_helpers import PROMPT

from fake_backends.deployment.assembly import FakeDeployment

DESERIALIZE = "Failed to deserialize the JSON body into the target type: "
MESSAGES = [{"role": "user", "content": "x"}]


def _assert_flat(response: httpx.Response, status: int, reason: str) -> str:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"message", "type", "code"}
    assert body["type"] == reason and body["code"] == status
    message: str = body["message"]
    return message


@pytest.mark.parametrize(
    ("path", "body", "prefix"),
    [
        (
            "/v1/completions",
            {"model": "toy", "max_tokens": 3},
            DESERIALIZE + "missing field `prompt`",
        ),
        (
            "/v1/completions",
            {"model": "toy", "prompt": PROMPT, "max_tokens": 0},
            "Validation: Max tokens must be greater than 0, got 0",
        ),
        ("/v1/completions", {"model": "toy", "prompt": PROMPT, "max_tokens": -2}, DESERIALIZE),
        ("/v1/completions", {"model": "toy", "prompt": PROMPT, "logprobs": -1}, DESERIALIZE),
        ("/v1/completions", {"model": "toy", "prompt": PROMPT, "prompt_logprobs": -1}, DESERIALIZE),
        (
            "/v1/completions",
            {"model": "toy", "prompt": PROMPT, "nvext": {"bogus": 1}},
            DESERIALIZE + "unknown field `bogus`",
        ),
        (
            "/v1/completions",
            {"model": "toy", "prompt": PROMPT, "nvext": {"prompt_logprobs": 1}},
            DESERIALIZE + "unknown field `prompt_logprobs`, expected one of `greed_sampling`",
        ),
        (
            "/v1/completions",
            {"model": "toy", "prompt": [1, 99999]},
            "Invalid request",
        ),  # real vLLM 0.31.0
        (
            "/v1/chat/completions",
            {"model": "toy", "max_tokens": 3},
            DESERIALIZE + "missing field `messages`",
        ),
        # real 1.6.1 (fixtures/dynamo-1.6.1/*/refuse_*): the model is required, and a field the
        # request type does not know is refused, vLLM's and SGLang's own fields too
        ("/v1/completions", {"prompt": PROMPT}, DESERIALIZE + "missing field `model`"),
        ("/v1/chat/completions", {"messages": MESSAGES}, DESERIALIZE + "missing field `model`"),
        ("/v1/completions", {"model": None, "prompt": PROMPT}, DESERIALIZE + "invalid type: null"),
        (
            "/v1/completions",
            {"model": "toy", "prompt": PROMPT, "use_beam_search": False},
            "Validation: Unsupported parameter(s): `use_beam_search`",
        ),
        (
            "/v1/chat/completions",
            {"model": "toy", "messages": MESSAGES, "rid": "a", "bogus": None},
            "Validation: Unsupported parameter(s): `rid`, `bogus`",
        ),
        (
            "/v1/completions",
            {"model": "toy", "prompt": PROMPT, "top_logprobs": 1},
            "Validation: Unsupported parameter(s): `top_logprobs`",
        ),
        (
            "/v1/completions",
            {"model": "nope", "prompt": PROMPT, "bogus": 1},
            "Validation: Unsupported parameter(s): `bogus`",
        ),
        (
            "/v1/completions",
            {"model": "toy", "prompt": PROMPT, "logprobs": 21},
            "Validation: Logprobs",
        ),
        ("/v1/completions", {"model": "toy", "prompt": PROMPT, "top_p": 0}, "Validation: Top_p"),
        (
            "/v1/chat/completions",
            {"model": "toy", "messages": MESSAGES, "max_tokens": 0},
            "Validation: Max tokens",
        ),
        (
            "/v1/chat/completions",
            {"model": "toy", "messages": MESSAGES, "nvext": {"x": 1}},
            DESERIALIZE + "unknown field `x`",
        ),
    ],
)
def test_bad_requests(
    client: httpx.Client,
    any_backend: FakeDeployment,
    path: str,
    body: dict[str, object],
    prefix: str,
) -> None:
    message = _assert_flat(
        client.post(any_backend.frontend_url + path, json=body), 400, "Bad Request"
    )
    assert message.startswith(prefix), message


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_what_the_engine_refuses(
    client: httpx.Client, request: pytest.FixtureRequest, backend: str
) -> None:
    """Real vLLM 0.31.0 and SGLang 0.5.21 refuse min_tokens above max_tokens behind 1.6.1 (400
    "Bad Request"); vLLM alone refuses more than 20 prompt logprobs."""
    dep: FakeDeployment = request.getfixturevalue(backend)
    url = f"{dep.frontend_url}/v1/completions"
    body = {"model": "toy", "prompt": PROMPT, "max_tokens": 2}
    few = client.post(url, json={**body, "min_tokens": 4})
    assert _assert_flat(few, 400, "Bad Request") == "Bad Request"
    many = client.post(url, json={**body, "prompt_logprobs": 21})
    assert many.status_code == (400 if backend == "vllm" else 200), many.text


def test_bad_json_and_wrong_content_type(client: httpx.Client, vllm: FakeDeployment) -> None:
    url = f"{vllm.frontend_url}/v1/completions"
    bad = client.post(
        url, content=b'{"model": "toy", "prompt": ', headers={"content-type": "application/json"}
    )
    assert _assert_flat(bad, 400, "Bad Request").startswith(DESERIALIZE)
    plain = client.post(url, content=b'{"prompt": [1, 2]}', headers={"content-type": "text/plain"})
    message = _assert_flat(plain, 415, "Unsupported Media Type")
    assert message == "Expected request with Content-Type application/json"


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_completion_ids_need_one_choice(
    client: httpx.Client, vllm: FakeDeployment, path: str
) -> None:
    body = {
        "model": "toy",
        "n": 2,
        "nvext": {"extra_fields": ["completion_token_ids"]},
        **({"prompt": PROMPT} if path == "/v1/completions" else {"messages": MESSAGES}),
    }
    message = _assert_flat(client.post(vllm.frontend_url + path, json=body), 400, "Bad Request")
    expected = (
        "Validation: "
        '`nvext.extra_fields=["completion_token_ids"]` requires exactly one generated choice'
    )
    assert message == expected


def test_unknown_model_and_omitted_model(client: httpx.Client, vllm: FakeDeployment) -> None:
    """An unknown model is a 404 once the body validated (a body the frontend refuses is a 400
    whatever its model); an omitted one is a 400, as on the real 1.6.1 frontend."""
    r = client.post(f"{vllm.frontend_url}/v1/completions", json={"model": "nope", "prompt": PROMPT})
    assert r.json() == {"message": "Model not found", "type": "Not Found", "code": 404}
    stream = client.post(
        f"{vllm.frontend_url}/v1/chat/completions",
        json={"model": "nope", "messages": MESSAGES, "stream": True},
    )
    assert _assert_flat(stream, 404, "Not Found") == "Model not found"
    refused = client.post(
        f"{vllm.frontend_url}/v1/completions",
        json={"model": "nope", "prompt": PROMPT, "max_tokens": 0},
    )
    assert _assert_flat(refused, 400, "Bad Request").startswith("Validation: Max tokens")
    ok = client.post(
        f"{vllm.frontend_url}/v1/completions",
        json={"model": "toy", "prompt": PROMPT, "max_tokens": 1},
    )
    assert ok.status_code == 200
    omitted = client.post(
        f"{vllm.frontend_url}/v1/completions", json={"prompt": PROMPT, "max_tokens": 1}
    )
    assert _assert_flat(omitted, 400, "Bad Request") == DESERIALIZE + "missing field `model`"


def test_deprecated_chat_functions_are_not_implemented(
    client: httpx.Client, vllm: FakeDeployment
) -> None:
    body = {"model": "toy", "messages": MESSAGES, "functions": [], "bogus": 1}
    reply = client.post(f"{vllm.frontend_url}/v1/chat/completions", json=body)
    message = _assert_flat(reply, 501, "Not Implemented")
    assert (
        message == "Validation: `functions` is deprecated. Please migrate to use `tools` instead."
    )


def test_unknown_paths(client: httpx.Client, any_backend: FakeDeployment) -> None:
    assert _assert_flat(client.get(f"{any_backend.frontend_url}/v1/nope"), 404, "Not Found") == (
        "Route not found: GET /v1/nope"
    )
    assert _assert_flat(
        client.post(f"{any_backend.frontend_url}/v1/nope", json={}), 404, "Not Found"
    ) == ("Route not found: POST /v1/nope")
    rl = client.get(f"{any_backend.frontend_url}/v1/rl/workers")
    assert _assert_flat(rl, 404, "Not Found") == "Route not found: GET /v1/rl/workers"
    assert client.get(f"{any_backend.frontend_url}/v1/completions").status_code == 405


def test_x_request_id_is_echoed(client: httpx.Client, vllm: FakeDeployment) -> None:
    headers = {"x-request-id": "fixture-req-0001"}
    body = {"model": "toy", "prompt": PROMPT, "max_tokens": 2}
    plain = client.post(f"{vllm.frontend_url}/v1/completions", json=body, headers=headers)
    streamed = client.post(
        f"{vllm.frontend_url}/v1/completions", json={**body, "stream": True}, headers=headers
    )
    for response in (plain, streamed):
        assert response.headers["x-request-id"] == "fixture-req-0001"
    assert not plain.json()["id"].endswith("fixture-req-0001")
    assert (
        "x-request-id" not in client.post(f"{vllm.frontend_url}/v1/completions", json=body).headers
    )


def test_no_workers_means_no_model(client: httpx.Client) -> None:
    """Recorded 1.6.1 (no_model_*): the generation routes vanish; health stays healthy."""
    with FakeDeployment("sglang", workers=0) as empty:
        for path, body in (
            ("/v1/completions", {"prompt": PROMPT}),
            ("/v1/chat/completions", {"messages": MESSAGES}),
            ("/generate", {"input_ids": PROMPT, "stream": True}),
        ):
            r = client.post(empty.frontend_url + path, json=body)
            assert r.status_code == 404 and r.content == b"" and "content-type" not in r.headers
        assert client.get(f"{empty.frontend_url}/v1/models").json() == {
            "object": "list",
            "data": [],
        }
        health = client.get(f"{empty.frontend_url}/health")
        assert health.status_code == 200
        assert health.json() == {"status": "healthy", "endpoints": [], "instances": []}
        assert client.get(f"{empty.rl_url}/v1/rl/workers").json()["workers"] == []
