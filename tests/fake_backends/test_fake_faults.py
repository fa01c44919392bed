"""Every fault in the catalogue manifests: each test compares a faulty answer with a clean one.
(Long because it holds one short demonstration per fault of the catalogue.)

``@shows`` registers which faults a test demonstrates; the last test fails if a fault
of the catalogue has no demonstration, so adding a fault without a test is caught.  The
control-plane faults are demonstrated in ``test_fake_control_faults``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import test_fake_admin_vllm  # noqa: F401  (registers the pause-abort demonstration)
import test_fake_admin_vllm_sidecar  # noqa: F401  (registers the sidecar demonstrations)
import test_fake_control_faults  # noqa: F401  (registers the control-plane demonstrations)
import test_fake_distributed_faults  # noqa: F401  (registers the distributed-update demonstrations)
import test_fake_metadata_upload  # noqa: F401  (registers the metadata_upload demonstrations)
import test_fake_pause_mode_faults  # noqa: F401  (registers the pause-mode demonstrations)
import test_fake_probe_faults  # noqa: F401  (registers the route-probe demonstrations)
import test_fake_refit_faults  # noqa: F401  (registers the several-refits demonstrations)
import test_fake_stream_faults  # noqa: F401  (registers the stream-level data demonstrations)
import test_fake_trace_faults  # noqa: F401  (registers the request-trace demonstrations)
import test_fake_version_faults  # noqa: F401  (registers the weight-version demonstrations)
from fake_backend_helpers import (
    DEMONSTRATED,
    DONE,
    PROMPT,
    chat,
    completions,
    faulted,
    generate,
    parse_sse,
    rl_workers,
    shows,
    stream_chunks,
)

from fake_backends import FAULT_NAMES
from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.frontend.sglang_native import SglangEvents, parse_sglang_request
from fake_backends.model.tokenizer import BOS_ID, byte_level_ids

IDS = {"extra_fields": ["completion_token_ids"]}


def _stream(client: httpx.Client, dep: FakeDeployment, **body: Any) -> list[Any]:
    return parse_sse(completions(client, dep, stream=True, **body).text)


def _sglang_final(
    client: httpx.Client, dep: FakeDeployment, **body: Any
) -> tuple[list[Any], dict[str, Any]]:
    events = parse_sse(generate(client, dep, input_ids=PROMPT, **body).text)
    return events, stream_chunks(events)[-1]


# -- prompt logprobs --------------------------------------------------------------------


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
    _, sg_clean = _sglang_final(client, sglang, return_logprob=True, logprob_start_len=0)
    with (
        faulted(vllm, "prompt_logprobs_shifted_by_one"),
        faulted(sglang, "prompt_logprobs_shifted_by_one"),
    ):
        assert _prompt_lps(client, vllm) == [None, None, *clean[1:-1]]
        shifted_chat = chat(client, vllm, max_tokens=1, prompt_logprobs=0).json()["prompt_logprobs"]
        assert shifted_chat == [None, None, *clean_chat[1:-1]]
        _, sg = _sglang_final(client, sglang, return_logprob=True, logprob_start_len=0)
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
        _, sg = _sglang_final(client, sglang, return_logprob=True, logprob_start_len=0)
    assert dropped == clean[1:] and len(dropped) == len(PROMPT) - 1 and dropped[0] is not None
    assert [t[1] for t in sg["meta_info"]["input_token_logprobs"]] == PROMPT[1:]


# -- selected logprobs ------------------------------------------------------------------


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
        chunks = stream_chunks(_stream(client, vllm, prompt=PROMPT, max_tokens=3, logprobs=0))
        _, sg = _sglang_final(client, sglang, return_logprob=True)
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


@shows("stop_reason_in_choices")
def test_stop_reason_in_choices(client: httpx.Client, vllm: FakeDeployment) -> None:
    body = {"prompt": PROMPT, "max_tokens": 24, "stop": ["e", "the", "a"], "nvext": IDS}
    clean = completions(client, vllm, **body).json()
    assert "stop_reason" not in clean["choices"][0] and "stop_reason" not in clean["nvext"]
    with faulted(vllm, "stop_reason_in_choices"):
        leaked = completions(client, vllm, **body).json()
        streamed = _stream(client, vllm, **body)
    assert "stop_reason" in leaked["choices"][0]
    finals = [
        c for c in stream_chunks(streamed) if c["choices"] and c["choices"][0].get("finish_reason")
    ]
    assert "stop_reason" in finals[-1]["choices"][0]


@shows("logprobs_absent")
def test_logprobs_absent(client: httpx.Client, vllm: FakeDeployment) -> None:
    def asked() -> tuple[dict[str, Any], dict[str, Any], list[Any], list[Any]]:
        body = completions(client, vllm, prompt=PROMPT, max_tokens=3, logprobs=1).json()
        chat_body = chat(client, vllm, max_tokens=3, logprobs=True, top_logprobs=2).json()
        chunks = stream_chunks(_stream(client, vllm, prompt=PROMPT, max_tokens=3, logprobs=1))
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
        _, sg = _sglang_final(client, sglang, return_logprob=True, top_logprobs_num=2)
    for token, top in zip(bad["tokens"], bad["top_logprobs"], strict=True):
        assert token not in top and len(top) == 1  # greedy: the sampled token was rank 1 of 2
    for entry in content["content"]:
        assert entry["token"] not in [alt["token"] for alt in entry["top_logprobs"]]
    for token, top in zip(sg["output_ids"], sg["meta_info"]["output_top_logprobs"], strict=True):
        assert token not in [t[1] for t in top]


# -- token ids --------------------------------------------------------------------------


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
        chunks = stream_chunks(_stream(client, vllm, prompt=PROMPT, max_tokens=3, nvext=IDS))
    assert "nvext" not in body
    assert all("nvext" not in c for c in chunks)


@shows("prompt_ids_missing")
def test_prompt_ids_missing(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["prompt_token_ids", "completion_token_ids"]}
    clean = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields).json()
    assert clean["nvext"]["prompt_token_ids"] == PROMPT
    with faulted(vllm, "prompt_ids_missing"):
        bad = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields).json()
        chunks = stream_chunks(_stream(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields))
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
        chunks = stream_chunks(_stream(client, vllm, prompt=PROMPT, max_tokens=4, nvext=IDS))
        same = completions(client, vllm, prompt=PROMPT, max_tokens=4, nvext=IDS).json()["nvext"][
            "completion_token_ids"
        ]
        _, sg = _sglang_final(client, sglang, sampling_params={"max_new_tokens": 4})
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


# -- choices, finish, usage, identity ----------------------------------------------------


@shows("wrong_choice_count")
def test_wrong_choice_count(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "wrong_choice_count"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=2).json()
        chat_body = chat(client, vllm, max_tokens=2, n=2).json()
        chunks = stream_chunks(_stream(client, vllm, prompt=PROMPT, max_tokens=2))
    assert [c["index"] for c in body["choices"]] == [0, 1]
    assert len(chat_body["choices"]) == 3
    assert {c["choices"][0]["index"] for c in chunks} == {0, 1}


@shows("finish_reason_missing")
def test_finish_reason_missing(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    with faulted(vllm, "finish_reason_missing"), faulted(sglang, "finish_reason_missing"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=2).json()
        chunks = stream_chunks(parse_sse(chat(client, vllm, max_tokens=2, stream=True).text))
        _, sg = _sglang_final(client, sglang)
        completion_chunks = stream_chunks(_stream(client, vllm, prompt=PROMPT, max_tokens=2))
    assert body["choices"][0]["finish_reason"] is None
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    assert [c["choices"][0].get("finish_reason", "absent") for c in completion_chunks] == [
        "absent",
        None,
    ]
    assert sg["meta_info"]["finish_reason"] is None


@shows("unknown_finish_reason")
def test_unknown_finish_reason(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    with faulted(vllm, "unknown_finish_reason"), faulted(sglang, "unknown_finish_reason"):
        body = chat(client, vllm, max_tokens=2).json()
        chunks = stream_chunks(_stream(client, vllm, prompt=PROMPT, max_tokens=2))
        _, sg = _sglang_final(client, sglang)
    assert body["choices"][0]["finish_reason"] == "weird_reason"
    assert chunks[-1]["choices"][0]["finish_reason"] == "weird_reason"
    assert sg["meta_info"]["finish_reason"] == {"type": "weird_reason"}


@shows("usage_counts_wrong")
def test_usage_counts_wrong(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "usage_counts_wrong"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=3).json()
        usage = stream_chunks(
            _stream(
                client, vllm, prompt=PROMPT, max_tokens=3, stream_options={"include_usage": True}
            )
        )[-1]["usage"]
    for got in (body["usage"], usage):
        assert (got["prompt_tokens"], got["completion_tokens"], got["total_tokens"]) == (5, 4, 9)


@shows("model_identity_mismatch")
def test_model_identity_mismatch(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "model_identity_mismatch"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=1).json()
        listed = client.get(f"{vllm.frontend_url}/v1/models").json()["data"][0]["id"]
        chunks = stream_chunks(parse_sse(chat(client, vllm, max_tokens=1, stream=True).text))
    assert body["model"] == "other-model" and listed == "toy"
    assert {c["model"] for c in chunks} == {"other-model"}


# -- validation, bodies, headers ---------------------------------------------------------


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
        body = {"prompt": PROMPT, "max_tokens": 2}
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


# -- stream shape -----------------------------------------------------------------------


@shows("double_terminal")
def test_double_terminal(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    with faulted(vllm, "double_terminal"), faulted(sglang, "double_terminal"):
        chunks = stream_chunks(
            _stream(client, vllm, prompt=PROMPT, max_tokens=3, n=2, temperature=1.0, seed=2)
        )
        sg_events, _ = _sglang_final(client, sglang)
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
        events = _stream(client, vllm, prompt=PROMPT, max_tokens=2)
        sg_events, _ = _sglang_final(client, sglang)
    assert DONE not in events and events[-1]["choices"][0].get("finish_reason") == "length"
    assert DONE not in sg_events


@shows("content_after_terminal")
def test_content_after_terminal(
    client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    with faulted(vllm, "content_after_terminal"), faulted(sglang, "content_after_terminal"):
        chunks = stream_chunks(_stream(client, vllm, prompt=PROMPT, max_tokens=2))
        chat_chunks = stream_chunks(parse_sse(chat(client, vllm, max_tokens=2, stream=True).text))
        sg_events, _ = _sglang_final(client, sglang)
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
        events = _stream(client, vllm, prompt=PROMPT, max_tokens=1)
        chat_events = parse_sse(chat(client, vllm, max_tokens=4, stream=True).text)
        sg_events, _ = _sglang_final(client, sglang)
    assert len(events) == 1 and "finish_reason" not in events[0]["choices"][0]
    assert len(chat_events) == 1 and chat_events[0]["choices"][0]["finish_reason"] is None
    assert len(sg_events) == 1 and sg_events[0]["meta_info"]["finish_reason"] is None


# -- discovery --------------------------------------------------------------------------


def _by_id(body: dict[str, Any], instance_id: int) -> list[dict[str, Any]]:
    return [w for w in body["workers"] if w["instance_id"] == instance_id]


@shows("protocol_version_2")
def test_protocol_version_2(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "protocol_version_2"):
        assert rl_workers(client, vllm)["protocol_version"] == 2


@shows("rl_listener_gateway_body")
def test_rl_listener_gateway_body(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "rl_listener_gateway_body"):
        body = rl_workers(client, vllm)
    assert body["protocol_version"] == 1 and body["total"] == 2 and "namespace" not in body
    assert all(
        {"id", "url", "engine"} <= set(w) and "instance_id" not in w for w in body["workers"]
    )


@shows(
    "worker_without_routes",
    "request_plane_url_mismatch",
    "probe_error_with_routes",
    "optional_field_null",
)
def test_worker_zero_faults(client: httpx.Client, vllm: FakeDeployment) -> None:
    first, second = (w["instance_id"] for w in vllm.workers)
    expectations: dict[str, Callable[[dict[str, Any]], bool]] = {
        "worker_without_routes": lambda w: "routes" not in w,
        "request_plane_url_mismatch": lambda w: (
            w["request_plane_url"] == "dyn://dynamo.backend.generate"
        ),
        "probe_error_with_routes": lambda w: (
            isinstance(w.get("error"), str) and len(w["routes"]) > 0
        ),
        "optional_field_null": lambda w: "system_url" in w and w["system_url"] is None,
    }
    for fault, broken in expectations.items():
        with faulted(vllm, fault):
            body = rl_workers(client, vllm)
        (zero,) = _by_id(body, first)
        (one,) = _by_id(body, second)
        assert broken(zero), fault
        assert not broken(one), fault


@shows("duplicate_instance_ids")
def test_duplicate_instance_ids(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "duplicate_instance_ids"):
        body = rl_workers(client, vllm)
    assert len(_by_id(body, vllm.workers[0]["instance_id"])) == 2


@shows("routes_unsorted", "routes_duplicated")
def test_route_list_faults(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "routes_unsorted"):
        unsorted = rl_workers(client, vllm)["workers"][0]["routes"]
    with faulted(vllm, "routes_duplicated"):
        duplicated = rl_workers(client, vllm)["workers"][0]["routes"]
    assert unsorted != sorted(unsorted) and len(set(unsorted)) == len(unsorted)
    assert duplicated == sorted(duplicated) and len(set(duplicated)) < len(duplicated)


@shows("instance_id_rounded")
def test_instance_id_rounded(client: httpx.Client, vllm: FakeDeployment) -> None:
    exact = vllm.workers[0]["instance_id"]
    with faulted(vllm, "instance_id_rounded"):
        raw = client.get(f"{vllm.rl_url}/v1/rl/workers").text
    assert str(exact) not in raw and "7.587886443219045e+18" in raw
    values = [w["instance_id"] for w in json.loads(raw)["workers"]]
    assert all(isinstance(v, float) for v in values) and float(exact) in values


@shows("worker_identity_unstable")
def test_worker_identity_unstable(client: httpx.Client, vllm: FakeDeployment) -> None:
    stable = {w["instance_id"] for w in vllm.workers}
    assert {w["instance_id"] for w in rl_workers(client, vllm)["workers"]} == stable
    with faulted(vllm, "worker_identity_unstable"):
        first = {w["instance_id"] for w in rl_workers(client, vllm)["workers"]}
        second = {w["instance_id"] for w in rl_workers(client, vllm)["workers"]}
    assert first != stable and second != stable and first != second
    assert len(first) == len(second) == 2


# -- SGLang native ----------------------------------------------------------------------


@shows("sglang_input_logprob_first_not_null")
def test_sglang_input_logprob_first_not_null(client: httpx.Client, sglang: FakeDeployment) -> None:
    with faulted(sglang, "sglang_input_logprob_first_not_null"):
        _, sg = _sglang_final(client, sglang, return_logprob=True, logprob_start_len=0)
    first = sg["meta_info"]["input_token_logprobs"][0]
    assert isinstance(first[0], float) and first[1] == PROMPT[0]


@shows("sglang_output_logprob_id_mismatch")
def test_sglang_output_logprob_id_mismatch(client: httpx.Client, sglang: FakeDeployment) -> None:
    with faulted(sglang, "sglang_output_logprob_id_mismatch"):
        _, sg = _sglang_final(client, sglang, return_logprob=True)
    assert [t[1] for t in sg["meta_info"]["output_token_logprobs"]] == [
        i + 1 for i in sg["output_ids"]
    ]


# -- bookkeeping ------------------------------------------------------------------------


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_every_fault_is_demonstrated(name: str) -> None:
    assert name in DEMONSTRATED, f"no test shows fault {name}"


def test_faults_switch_in_process(vllm: FakeDeployment) -> None:
    assert vllm.set_faults(["done_missing", "nan_logprob", "done_missing"]) == (
        "done_missing",
        "nan_logprob",
    )
    assert vllm.faults == ("done_missing", "nan_logprob")
    with pytest.raises(ValueError, match="valid faults are"):
        vllm.set_faults(["no_such_fault"])
    assert vllm.faults == ("done_missing", "nan_logprob")  # unchanged on error
    with pytest.raises(ValueError, match="no_such_fault"):
        FakeDeployment("vllm", faults=["no_such_fault"])


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


@shows("silent_cancellation")
def test_silent_cancellation(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["detailed_finish_reason"]}
    clean = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields).json()
    with faulted(vllm, "silent_cancellation"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=3, nvext=fields).json()
    assert clean["nvext"]["detailed_finish_reason"] == "length"
    assert body["choices"][0]["finish_reason"] == clean["choices"][0]["finish_reason"]
    assert body["nvext"]["detailed_finish_reason"] == "cancelled"


@shows("weight_version_misreported")
def test_weight_version_misreported(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["completion_token_ids", "engine_data"]}
    clean = completions(client, vllm, prompt=PROMPT, max_tokens=2, nvext=fields).json()
    with faulted(vllm, "weight_version_misreported"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=2, nvext=fields).json()
    assert body["nvext"]["engine_data"]["weight_version"] == "never-applied-weights"
    assert clean["nvext"]["engine_data"]["weight_version"] != "never-applied-weights"


@shows("matched_stop_id_dropped")
def test_matched_stop_id_dropped(client: httpx.Client, vllm: FakeDeployment) -> None:
    greedy = {"prompt": PROMPT, "max_tokens": 6, "temperature": 0}
    fields = {"extra_fields": ["completion_token_ids", "stop_reason"]}
    ids = completions(client, vllm, nvext=fields, **greedy).json()["nvext"]["completion_token_ids"]
    stop = {**greedy, "stop_token_ids": [ids[1]]}
    clean = completions(client, vllm, nvext=fields, **stop).json()
    with faulted(vllm, "matched_stop_id_dropped"):
        body = completions(client, vllm, nvext=fields, **stop).json()
    assert clean["nvext"]["completion_token_ids"] == ids[:2]
    assert body["nvext"]["completion_token_ids"] == ids[:1]
    assert body["usage"]["completion_tokens"] == 1 and body["choices"][0]["finish_reason"] == "stop"
    assert body["nvext"]["stop_reason"] == ids[1]


@shows("length_reported_as_stop")
def test_length_reported_as_stop(client: httpx.Client, vllm: FakeDeployment) -> None:
    greedy = {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "ignore_eos": True}
    assert completions(client, vllm, **greedy).json()["choices"][0]["finish_reason"] == "length"
    with faulted(vllm, "length_reported_as_stop"):
        body = completions(client, vllm, **greedy).json()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 4


@shows("native_route_sequence_differs")
def test_native_route_sequence_differs(client: httpx.Client, sglang: FakeDeployment) -> None:
    params = {"max_new_tokens": 4, "temperature": 0}
    _, clean = _sglang_final(client, sglang, sampling_params=params)
    with faulted(sglang, "native_route_sequence_differs"):
        _, other = _sglang_final(client, sglang, sampling_params=params)
    ids = completions(client, sglang, prompt=PROMPT, max_tokens=4, temperature=0, nvext=IDS).json()[
        "nvext"
    ]["completion_token_ids"]
    assert clean["output_ids"] == ids != other["output_ids"]


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
    beyond = {"prompt": PROMPT, "max_tokens": 4096, "temperature": 0}
    refused = completions(client, vllm, **beyond)
    assert refused.status_code == 400
    assert refused.json()["details"]["type"] == "context_length"
    with faulted(vllm, "context_window_unchecked"):
        assert completions(client, vllm, **beyond).status_code == 200


@shows("weight_versions_span_collapsed")
def test_weight_versions_span_collapsed(sglang: FakeDeployment) -> None:
    """Two tokens released under `old`, two after the worker moved to `new`: the faithful spans
    split there, the faulty ones give all four to `new`."""
    state = sglang.state
    worker = state.workers[0]
    request = parse_sglang_request({"input_ids": PROMPT, "stream": True})

    def spans() -> list[dict[str, Any]]:
        events = SglangEvents(state, worker, request, cached_tokens=0)
        saved = worker.version, worker.version_declared
        try:
            for version in ("old", "old", "new", "new"):
                worker.version, worker.version_declared = version, True
                events._versions.append(events._current_version())
            return events.event(4, final=False)["meta_info"]["weight_versions"]
        finally:
            worker.version, worker.version_declared = saved

    assert spans() == [
        {"version": "old", "start": 0, "end": 2},
        {"version": "new", "start": 2, "end": 4},
    ]
    with faulted(sglang, "weight_versions_span_collapsed"):
        assert spans() == [{"version": "new", "start": 0, "end": 4}]
