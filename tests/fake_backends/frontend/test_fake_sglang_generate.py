"""SGLang's native ``POST /generate`` (SGLang personality only, stream only)."""

from __future__ import annotations

import httpx
import pytest
from fake_backend_helpers import DONE, PROMPT, completions, generate, parse_sse, stream_chunks

from fake_backends.deployment.assembly import FakeDeployment


def test_cumulative_events(client: httpx.Client, sglang: FakeDeployment) -> None:
    r = generate(
        client,
        sglang,
        input_ids=PROMPT,
        sampling_params={"max_new_tokens": 4},
        return_logprob=True,
        logprob_start_len=0,
        top_logprobs_num=2,
        rid="req-1",
    )
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
    events = parse_sse(r.text)
    assert events[-1] == DONE
    chunks = stream_chunks(events)
    assert len(chunks) == 4
    for n, event in enumerate(chunks, start=1):
        meta = event["meta_info"]
        assert len(event["output_ids"]) == n == meta["completion_tokens"]
        assert meta["id"] == "req-1" and meta["prompt_tokens"] == len(PROMPT)
        assert meta["cached_tokens"] == 0 and meta["weight_version"] == "default"
        assert [t[1] for t in meta["output_token_logprobs"]] == event["output_ids"]
        assert len(meta["output_top_logprobs"]) == n
    final = chunks[-1]
    assert final["meta_info"]["finish_reason"] == {"type": "length", "length": 4}
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    inputs = final["meta_info"]["input_token_logprobs"]
    assert [t[1] for t in inputs] == PROMPT and inputs[0][0] is None
    assert all(isinstance(t[0], float) for t in inputs[1:])
    assert final["meta_info"]["input_top_logprobs"][0] is None
    reference = completions(
        client,
        sglang,
        prompt=PROMPT,
        max_tokens=4,
        logprobs=0,
        nvext={"extra_fields": ["completion_token_ids"]},
    ).json()
    assert final["output_ids"] == reference["nvext"]["completion_token_ids"]
    assert final["text"] == reference["choices"][0]["text"]
    expected = reference["choices"][0]["logprobs"]["token_logprobs"]
    got = [t[0] for t in final["meta_info"]["output_token_logprobs"]]
    assert all(abs(a - b) < 1e-6 for a, b in zip(got, expected, strict=True))


def test_input_logprobs_from_start_and_default(
    client: httpx.Client, sglang: FakeDeployment
) -> None:
    later = stream_chunks(
        parse_sse(
            generate(
                client, sglang, input_ids=PROMPT, return_logprob=True, logprob_start_len=2
            ).text
        )
    )
    inputs = later[-1]["meta_info"]["input_token_logprobs"]
    assert [t[1] for t in inputs] == PROMPT[2:] and inputs[0][0] is None
    default = stream_chunks(
        parse_sse(generate(client, sglang, input_ids=PROMPT, return_logprob=True).text)
    )
    assert "input_token_logprobs" not in default[-1]["meta_info"]
    bare = stream_chunks(parse_sse(generate(client, sglang, input_ids=PROMPT).text))
    assert "output_token_logprobs" not in bare[-1]["meta_info"]


def test_stop_reasons(client: httpx.Client, sglang: FakeDeployment) -> None:
    eos = stream_chunks(
        parse_sse(
            generate(client, sglang, input_ids=PROMPT, sampling_params={"max_new_tokens": 64}).text
        )
    )
    assert eos[-1]["meta_info"]["finish_reason"] == {"type": "stop", "matched": 2}
    assert eos[-1]["output_ids"][-1] == 2


SGLANG_400 = {"object", "message", "type", "param", "code"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"text": "hello world", "stream": True}, "missing field `input_ids`"),  # recorded
        ({"input_ids": [], "stream": True}, "input_ids cannot be empty."),
        ({"stream": True}, "missing field `input_ids`"),
        (
            {"input_ids": PROMPT, "stream": True, "logprob_start_len": 99, "return_logprob": True},
            "logprob_start_len",
        ),
    ],
)
def test_bad_requests(
    client: httpx.Client, sglang: FakeDeployment, body: dict[str, object], message: str
) -> None:
    r = client.post(f"{sglang.frontend_url}/generate", json=body)
    assert r.status_code == 400
    error = r.json()
    assert set(error) == SGLANG_400 and error["object"] == "error" and error["param"] is None
    assert error["type"] == "Bad Request" and error["code"] == 400
    assert error["message"].startswith("Failed to deserialize the JSON body into the target type: ")
    assert message in error["message"]


def test_non_stream_is_not_implemented(client: httpx.Client, sglang: FakeDeployment) -> None:
    r = client.post(f"{sglang.frontend_url}/generate", json={"input_ids": PROMPT, "stream": False})
    assert r.status_code == 501
    assert r.json() == {
        "error": {
            "message": "non-streaming SGLang generate requests are not implemented; set stream=true"
        }
    }


def test_only_sglang_serves_generate(
    client: httpx.Client, vllm: FakeDeployment, trtllm: FakeDeployment
) -> None:
    for dep in (vllm, trtllm):
        assert generate(client, dep, input_ids=PROMPT).status_code == 404
