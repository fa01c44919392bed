"""The log-probability faults of the catalogue: prompt log probabilities shifted or missing their
leading null, selected ones short, reordered, absent, positive or NaN, top-k lists without the
selected token, and SGLang's native input and output log probabilities."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
from fake_backend_helpers import (
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


def _prompt_lps(client: httpx.Client, dep: FakeDeployment) -> list[Any]:
    body = completions(
        client,
        dep,
        prompt=PROMPT,
        max_tokens=1,
        prompt_logprobs=1,
        nvext={"extra_fields": ["prompt_logprobs"]},
    ).json()
    return list(body["nvext"]["prompt_logprobs"])


@shows("prompt_logprobs_shifted_by_one")
def test_prompt_logprobs_shifted(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    clean = _prompt_lps(client, vllm)
    clean_chat = chat(client, vllm, max_tokens=1, prompt_logprobs=0).json()["prompt_logprobs"]
    _, sg_clean = sglang_final(client, sglang, return_logprob=True, logprob_start_len=0)
    with (
        faulted(vllm, "prompt_logprobs_shifted_by_one"),
        faulted(sglang, "prompt_logprobs_shifted_by_one"),
    ):
        assert _prompt_lps(client, vllm) == [None, None, *clean[1:-1]]
        shifted_chat = chat(client, vllm, max_tokens=1, prompt_logprobs=0).json()["prompt_logprobs"]
        assert shifted_chat == [None, None, *clean_chat[1:-1]]
        _, sg = sglang_final(client, sglang, return_logprob=True, logprob_start_len=0)
    values = [t[0] for t in sg["meta_info"]["input_token_logprobs"]]
    assert values == [
        None,
        None,
        *[t[0] for t in sg_clean["meta_info"]["input_token_logprobs"]][1:-1],
    ]


@shows("prompt_logprobs_leading_null_dropped")
def test_prompt_logprobs_leading_null_dropped(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    clean = _prompt_lps(client, vllm)
    with (
        faulted(vllm, "prompt_logprobs_leading_null_dropped"),
        faulted(sglang, "prompt_logprobs_leading_null_dropped"),
    ):
        dropped = _prompt_lps(client, vllm)
        _, sg = sglang_final(client, sglang, return_logprob=True, logprob_start_len=0)
    assert dropped == clean[1:] and len(dropped) == len(PROMPT) - 1 and dropped[0] is not None
    assert [t[1] for t in sg["meta_info"]["input_token_logprobs"]] == PROMPT[1:]


def _lp_request(client: httpx.Client, dep: FakeDeployment) -> dict[str, Any]:
    body: dict[str, Any] = completions(
        client,
        dep,
        prompt=PROMPT,
        max_tokens=6,
        logprobs=1,
        ignore_eos=True,
        nvext={"extra_fields": ["completion_token_ids", "engine_data"]},
    ).json()
    return body


@shows("selected_logprobs_one_short")
def test_selected_logprobs_one_short(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    with (
        faulted(vllm, "selected_logprobs_one_short"),
        faulted(sglang, "selected_logprobs_one_short"),
    ):
        body = _lp_request(client, vllm)
        content = chat(client, vllm, max_tokens=6, logprobs=True, ignore_eos=True).json()[
            "choices"
        ][0]["logprobs"]
        chunks = stream_chunks(stream_events(client, vllm, prompt=PROMPT, max_tokens=3, logprobs=0))
        _, sg = sglang_final(client, sglang, return_logprob=True)
    lp = body["choices"][0]["logprobs"]
    assert len(body["nvext"]["completion_token_ids"]) == len(lp["tokens"]) == 6
    assert (
        len(lp["token_logprobs"]) == 5
        and len(body["nvext"]["engine_data"]["completion_logprobs"]) == 5
    )
    assert len(content["content"]) == 5
    assert [len(c["choices"][0]["logprobs"]["token_logprobs"]) for c in chunks] == [1, 1, 0]
    meta = sg["meta_info"]
    assert len(meta["output_token_logprobs"]) == len(sg["output_ids"]) - 1


@shows("logprobs_reordered")
def test_logprobs_reordered(client: httpx.Client, vllm: FakeDeployment) -> None:
    clean = _lp_request(client, vllm)
    with faulted(vllm, "logprobs_reordered"):
        bad = _lp_request(client, vllm)
    good_lps = clean["choices"][0]["logprobs"]["token_logprobs"]
    assert bad["choices"][0]["logprobs"]["token_logprobs"] == good_lps[::-1] != good_lps
    engine = clean["nvext"]["engine_data"]["completion_logprobs"]
    assert bad["nvext"]["engine_data"]["completion_logprobs"] == engine[::-1]


@shows("logprobs_absent")
def test_logprobs_absent(client: httpx.Client, vllm: FakeDeployment) -> None:
    def asked() -> tuple[dict[str, Any], dict[str, Any], list[Any], list[Any]]:
        body = completions(client, vllm, prompt=PROMPT, max_tokens=3, logprobs=1).json()
        chat_body = chat(client, vllm, max_tokens=3, logprobs=True, top_logprobs=2).json()
        chunks = stream_chunks(stream_events(client, vllm, prompt=PROMPT, max_tokens=3, logprobs=1))
        chat_chunks = stream_chunks(
            parse_sse(chat(client, vllm, max_tokens=3, logprobs=True, stream=True).text)
        )
        return body["choices"][0], chat_body["choices"][0], chunks, chat_chunks

    choice, chat_choice, chunks, chat_chunks = asked()
    assert len(choice["logprobs"]["token_logprobs"]) == 3
    assert len(chat_choice["logprobs"]["content"]) == 3
    assert all("logprobs" in c["choices"][0] for c in chunks)
    assert all(c["choices"][0]["logprobs"] is not None for c in chat_chunks)
    with faulted(vllm, "logprobs_absent"):
        choice, chat_choice, chunks, chat_chunks = asked()
    assert "logprobs" not in choice and choice["text"]
    assert "logprobs" in chat_choice and chat_choice["logprobs"] is None
    assert len(chunks) == 3 and all("logprobs" not in c["choices"][0] for c in chunks)
    assert len(chat_chunks) == 3 and all(c["choices"][0]["logprobs"] is None for c in chat_chunks)


@shows("positive_logprob")
def test_positive_logprob(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "positive_logprob"):
        bad = _lp_request(client, vllm)
    assert bad["choices"][0]["logprobs"]["token_logprobs"][0] == 0.5
    assert bad["nvext"]["engine_data"]["completion_logprobs"][0] == 0.5


@shows("nan_logprob")
def test_nan_logprob(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "nan_logprob"):
        raw = completions(client, vllm, prompt=PROMPT, max_tokens=3, logprobs=0)
    assert '"token_logprobs":[NaN,' in raw.text
    assert math.isnan(json.loads(raw.text)["choices"][0]["logprobs"]["token_logprobs"][0])


@shows("topk_missing_selected")
def test_topk_missing_selected(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    clean = completions(client, vllm, prompt=PROMPT, max_tokens=4, logprobs=2).json()["choices"][0][
        "logprobs"
    ]
    assert all(t in top for t, top in zip(clean["tokens"], clean["top_logprobs"], strict=True))
    with faulted(vllm, "topk_missing_selected"), faulted(sglang, "topk_missing_selected"):
        bad = completions(client, vllm, prompt=PROMPT, max_tokens=4, logprobs=2).json()["choices"][
            0
        ]["logprobs"]
        content = chat(client, vllm, max_tokens=4, top_logprobs=2, logprobs=True).json()["choices"][
            0
        ]["logprobs"]
        _, sg = sglang_final(client, sglang, return_logprob=True, top_logprobs_num=2)
    for token, top in zip(bad["tokens"], bad["top_logprobs"], strict=True):
        assert token not in top and len(top) == 1  # greedy: the sampled token was rank 1 of 2
    for entry in content["content"]:
        assert entry["token"] not in [alt["token"] for alt in entry["top_logprobs"]]
    for token, top in zip(sg["output_ids"], sg["meta_info"]["output_top_logprobs"], strict=True):
        assert token not in [t[1] for t in top]


@shows("sglang_input_logprob_first_not_null")
def test_sglang_input_logprob_first_not_null(client: httpx.Client, sglang: FakeDeployment) -> None:
    with faulted(sglang, "sglang_input_logprob_first_not_null"):
        _, sg = sglang_final(client, sglang, return_logprob=True, logprob_start_len=0)
    first = sg["meta_info"]["input_token_logprobs"][0]
    assert isinstance(first[0], float) and first[1] == PROMPT[0]


@shows("sglang_output_logprob_id_mismatch")
def test_sglang_output_logprob_id_mismatch(client: httpx.Client, sglang: FakeDeployment) -> None:
    with faulted(sglang, "sglang_output_logprob_id_mismatch"):
        _, sg = sglang_final(client, sglang, return_logprob=True)
    assert [t[1] for t in sg["meta_info"]["output_token_logprobs"]] == [
        i + 1 for i in sg["output_ids"]
    ]
