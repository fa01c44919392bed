"""The token-id faults of the catalogue: completion ids retokenized from the text or missing, prompt
ids with a BOS never sent or missing, streamed ids that differ from the unary ones, a text
prompt tokenized otherwise, engine_data ids that differ, and SGLang's native route generating
another sequence."""

from __future__ import annotations

import httpx
from fake_backend_helpers import (
    IDS,
    PROMPT,
    chat,
    completions,
    faulted,
    sglang_final,
    shows,
    stream_chunks,
    stream_events,
)

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.model.tokenizer import BOS_ID, byte_level_ids


@shows("completion_ids_retokenized")
def test_completion_ids_retokenized(client: httpx.Client, vllm: FakeDeployment) -> None:
    clean = completions(client, vllm, prompt=PROMPT, max_tokens=5, nvext=IDS).json()
    with faulted(vllm, "completion_ids_retokenized"):
        bad = completions(client, vllm, prompt=PROMPT, max_tokens=5, nvext=IDS).json()
    ids = bad["nvext"]["completion_token_ids"]
    assert (
        ids == byte_level_ids(clean["choices"][0]["text"]) != clean["nvext"]["completion_token_ids"]
    )
    assert all(7 <= i <= 262 for i in ids)


@shows("prompt_ids_with_unsent_bos")
def test_prompt_ids_with_unsent_bos(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["prompt_token_ids"]}
    with faulted(vllm, "prompt_ids_with_unsent_bos"):
        bad = completions(client, vllm, prompt=PROMPT, max_tokens=1, nvext=fields).json()
    assert bad["nvext"]["prompt_token_ids"] == [BOS_ID, *PROMPT]
    assert bad["usage"]["prompt_tokens"] == len(PROMPT)


@shows("completion_ids_missing")
def test_completion_ids_missing(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "completion_ids_missing"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=IDS).json()
        chunks = stream_chunks(stream_events(client, vllm, prompt=PROMPT, max_tokens=3, nvext=IDS))
    assert "nvext" not in body
    assert all("nvext" not in c for c in chunks)


@shows("prompt_ids_missing")
def test_prompt_ids_missing(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["prompt_token_ids", "completion_token_ids"]}
    clean = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields).json()
    assert clean["nvext"]["prompt_token_ids"] == PROMPT
    with faulted(vllm, "prompt_ids_missing"):
        bad = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields).json()
        chunks = stream_chunks(
            stream_events(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields)
        )
        chat_nvext = chat(client, vllm, max_tokens=3, nvext=fields).json()["nvext"]
    assert "prompt_token_ids" not in bad["nvext"]
    assert len(bad["nvext"]["completion_token_ids"]) == 3
    assert all("prompt_token_ids" not in c["nvext"] for c in chunks)
    assert [len(c["nvext"]["completion_token_ids"]) for c in chunks] == [1, 1, 1]
    assert "prompt_token_ids" not in chat_nvext and len(chat_nvext["completion_token_ids"]) == 3


@shows("stream_ids_differ")
def test_stream_ids_differ(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    whole = completions(client, vllm, prompt=PROMPT, max_tokens=4, nvext=IDS).json()["nvext"][
        "completion_token_ids"
    ]
    with faulted(vllm, "stream_ids_differ"), faulted(sglang, "stream_ids_differ"):
        chunks = stream_chunks(stream_events(client, vllm, prompt=PROMPT, max_tokens=4, nvext=IDS))
        same = completions(client, vllm, prompt=PROMPT, max_tokens=4, nvext=IDS).json()["nvext"][
            "completion_token_ids"
        ]
        _, sg = sglang_final(client, sglang, sampling_params={"max_new_tokens": 4})
    streamed = [i for c in chunks if "nvext" in c for i in c["nvext"]["completion_token_ids"]]
    assert same == whole and streamed == whole[:-1]
    assert "nvext" not in chunks[-1]
    assert len(sg["output_ids"]) == sg["meta_info"]["completion_tokens"] - 1


@shows("text_prompt_differs")
def test_text_prompt_differs(client: httpx.Client, trtllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["prompt_token_ids", "completion_token_ids"]}
    with faulted(trtllm, "text_prompt_differs"):
        by_text = completions(
            client, trtllm, prompt="hello world", max_tokens=4, nvext=fields
        ).json()
        reported = by_text["nvext"]["prompt_token_ids"]
        by_ids = completions(client, trtllm, prompt=reported, max_tokens=4, nvext=fields).json()
    assert reported[0] != BOS_ID and by_ids["nvext"]["prompt_token_ids"] == reported
    assert by_text["usage"]["prompt_tokens"] == by_ids["usage"]["prompt_tokens"] + 1
    assert by_text["nvext"]["completion_token_ids"] != by_ids["nvext"]["completion_token_ids"]


@shows("engine_data_ids_differ")
def test_engine_data_ids_differ(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["completion_token_ids", "engine_data"]}
    clean = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields).json()["nvext"]
    with faulted(vllm, "engine_data_ids_differ"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields).json()
    nvext = body["nvext"]
    assert clean["engine_data"]["completion_token_ids"] == clean["completion_token_ids"]
    assert nvext["completion_token_ids"] == clean["completion_token_ids"]
    assert nvext["engine_data"]["completion_token_ids"][:-1] == clean["completion_token_ids"][:-1]
    assert nvext["engine_data"]["completion_token_ids"] != nvext["completion_token_ids"]


@shows("native_route_sequence_differs")
def test_native_route_sequence_differs(client: httpx.Client, sglang: FakeDeployment) -> None:
    params = {"max_new_tokens": 4, "temperature": 0}
    _, clean = sglang_final(client, sglang, sampling_params=params)
    with faulted(sglang, "native_route_sequence_differs"):
        _, other = sglang_final(client, sglang, sampling_params=params)
    ids = completions(client, sglang, prompt=PROMPT, max_tokens=4, temperature=0, nvext=IDS).json()[
        "nvext"
    ]["completion_token_ids"]
    assert clean["output_ids"] == ids != other["output_ids"]
