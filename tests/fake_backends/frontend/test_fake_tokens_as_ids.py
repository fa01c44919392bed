"""`return_tokens_as_token_ids`, held to the real frontend's answers.

Recorded with the real Dynamo 1.6.1 frontend in front of real vLLM 0.31.0
(`fixtures/dynamo-1.6.1/vllm-cpu/*return_tokens_as_token_ids*`) and of our toy worker up to EOS
(`toy-worker/*return_tokens_as_token_ids_eos`), by `fixtures/dynamo-1.6.1/record_frontend.py`.
Values differ between engines; how each token is spelled does not. Each response is summarised
by that spelling (which token fields read `token_id:<id>`, whether the id is the generated one,
whether chat `bytes` are the spelling's bytes, how many alternatives a position lists), and the
fake's summary of the same request must be the recording's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_backend_helpers import parse_sse
from test_fake_recorded_shapes import _replay

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.deployment.pytest_fixtures import make_fake_deployment_fixture

RECORDINGS = Path(__file__).resolve().parents[3] / "fixtures" / "dynamo-1.6.1"
SPELLED_ID = re.compile(r"token_id:(\d+)")
tiny = make_fake_deployment_fixture(
    "tiny", "vllm", scope="module", workers=1, model="tiny", dynamo_release="1.6.1"
)
"""Served as the real vLLM stack was recorded (the fake's vocabulary has its 32768 ids)."""
CASES = sorted(
    f"{path.parent.name}/{path.stem}"
    for path in RECORDINGS.glob("*/*.json")
    if "return_tokens_as_token_ids" in path.stem
)


def _kind(text: str) -> str:
    return "id" if SPELLED_ID.fullmatch(text) else "text"


def _payloads(response: dict[str, Any]) -> list[dict[str, Any]]:
    if response.get("sse_events") is not None:
        return [e for e in response["sse_events"] if isinstance(e, dict)]
    return [response["body"]] if isinstance(response.get("body"), dict) else []


def spelling(response: dict[str, Any]) -> dict[str, Any]:
    """How a response spells its tokens (its status, and for a 200 every logprob token)."""
    summary: dict[str, Any] = {"status": response["status"]}
    sampled: set[str] = set()
    alternatives: set[str] = set()
    top_sizes: set[int] = set()
    ids_agree, bytes_agree, text_as_ids = True, True, False
    generated: list[int] = []
    spelled: list[str] = []
    for payload in _payloads(response):
        generated += (payload.get("nvext") or {}).get("completion_token_ids") or []
        for choice in payload.get("choices") or []:
            text = choice.get("text") or (choice.get("message") or choice.get("delta") or {}).get(
                "content"
            )
            text_as_ids |= bool(text and SPELLED_ID.search(text))
            logprobs = choice.get("logprobs")
            if not logprobs:
                continue
            if "tokens" in logprobs:  # completions
                spelled += logprobs["tokens"]
                sampled |= {_kind(t) for t in logprobs["tokens"]}
                for top in logprobs["top_logprobs"]:
                    alternatives |= {_kind(t) for t in top}
                    top_sizes.add(len(top))
                continue
            for entry in logprobs["content"]:  # chat
                sampled.add(_kind(entry["token"]))
                if _kind(entry["token"]) == "id":
                    ids_agree &= entry["token"] == f"token_id:{entry['token_id']}"
                    bytes_agree &= entry["bytes"] == list(entry["token"].encode())
                top_sizes.add(len(entry["top_logprobs"]))
                for alternative in entry["top_logprobs"]:
                    alternatives.add(_kind(alternative["token"]))
                    bytes_agree &= alternative["bytes"] == list(alternative["token"].encode())
    if spelled and all(_kind(t) == "id" for t in spelled):
        ids_agree &= spelled == [f"token_id:{i}" for i in generated] or not generated
    summary.update(
        sampled=sorted(sampled),
        alternatives=sorted(alternatives),
        top_sizes=sorted(top_sizes),
        ids_agree=ids_agree,
        bytes_agree=bytes_agree,
        text_spelled_as_ids=text_as_ids,
        prompt_logprobs="prompt_logprobs" in json.dumps(_payloads(response)),
    )
    return summary


def _answer(reply: httpx.Response) -> dict[str, Any]:
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        return {"status": reply.status_code, "sse_events": parse_sse(reply.text)}
    return {"status": reply.status_code, "body": reply.json()}


@pytest.mark.parametrize("case", CASES or [pytest.param("none", marks=pytest.mark.skip)])
def test_tokens_are_spelled_as_the_real_frontend_spells_them(
    case: str, client: httpx.Client, tiny: FakeDeployment, vllm: FakeDeployment
) -> None:
    recorded = json.loads((RECORDINGS / f"{case}.json").read_text())
    deployment = tiny if case.startswith("vllm-cpu/") else vllm
    got = _answer(_replay(client, deployment, recorded["request"]))
    assert spelling(got) == spelling(recorded["response"]), case


def test_the_recordings_spell_ids_where_asked() -> None:
    """What the recordings say, so that the summary above cannot hide it: with the flag every
    token and alternative reads `token_id:<id>` of the generated id, false reads text."""
    asked = spelling(_recording("vllm-cpu/completions_return_tokens_as_token_ids"))
    assert asked["sampled"] == asked["alternatives"] == ["id"] and asked["ids_agree"]
    chat = spelling(_recording("vllm-cpu/chat_stream_return_tokens_as_token_ids"))
    assert chat["sampled"] == ["id"] and chat["bytes_agree"] and chat["top_sizes"] == [2]
    plain = spelling(_recording("vllm-cpu/completions_return_tokens_as_token_ids_false"))
    assert plain["sampled"] == plain["alternatives"] == ["text"]
    eos = spelling(_recording("toy-worker/completions_return_tokens_as_token_ids_eos"))
    assert eos["top_sizes"] == [1]  # text spells EOS twice ("</s>" and ""); ids once
    refused = _recording("vllm-cpu/completions_return_tokens_as_token_ids_not_boolean")
    assert refused["status"] == 400


def _recording(case: str) -> dict[str, Any]:
    response: dict[str, Any] = json.loads((RECORDINGS / f"{case}.json").read_text())["response"]
    return response
