"""Invalid requests are rejected before generation, with a status and a flat error body."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance import Unobservable, contract
from rl_conformance.checks import errors, http
from rl_conformance.client.http import Client
from rl_conformance.model.prompts import stated_context_window
from rl_conformance.model.releases import has_request_check
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
PROMPT = [512, 733, 1024]


def reply_body(exchange: Exchange) -> Any:
    """The reply's JSON, or the start of a body that is not JSON."""
    try:
        return exchange.json()
    except ValueError:
        return exchange.body_preview()


INVALID = {
    "completion_ids_with_n2": ({"n": 2, "nvext": {"extra_fields": ["completion_token_ids"]}}, 400),
    "unknown_nvext_key": ({"nvext": {"not_a_field": True}}, 400),
    "max_tokens_zero": ({"max_tokens": 0}, 400),
    "unknown_model": ({"model": "no-such-model-for-conformance"}, 404),
}


@capability(contract.errors.VALIDATION)
@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_requests_are_rejected_with_flat_errors(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, case: str
) -> None:
    overrides, expected = INVALID[case]
    body: dict[str, Any] = {
        "model": rl_target.model,
        "prompt": PROMPT,
        "max_tokens": 2,
        **overrides,
    }
    exchange = rl_client.post(rl_target.url("/v1/completions"), body)
    parsed = reply_body(exchange)
    rl_verdict.check(errors.status_and_body(exchange.status, parsed, expected), exchange)


OUT_OF_EVERY_VOCABULARY = 2**31 - 1
"""A token id no tokenizer has, still a valid unsigned 32-bit id (the frontend's own type)."""


def context_window(rl_client: Client, rl_target: Target) -> int | None:
    """The model's context window as /v1/models states it (Dynamo's `context_window`, vLLM's
    `max_model_len`); None when it states none (a mocker without `--max-model-len` says 0)."""
    exchange = rl_client.get(rl_target.url("/v1/models"))
    try:
        return stated_context_window(exchange.json(), rl_target.model)
    except ValueError:
        return None


REFUSED_OVERFLOWS: dict[str, tuple[str, ...]] = {
    "vllm": ("prompt_beyond_context_window", "total_beyond_context_window"),
    "trtllm": ("prompt_beyond_context_window",),
    "sglang": (),
}
"""The overflows each backend's Dynamo worker tells the frontend to refuse (its `token_budget`,
`dynamo/common/token_budget.py` in the 1.6.1 wheel): vLLM a prompt or a prompt plus `max_tokens`
beyond `max_model_len`; TensorRT-LLM the prompt only (the engine may clamp the rest); SGLang
neither for certain, as both follow its `--allow-auto-truncate` and total-token settings."""


@capability(contract.errors.VALIDATION)
@pytest.mark.parametrize(
    "case",
    ["token_beyond_vocabulary", "prompt_beyond_context_window", "total_beyond_context_window"],
)
def test_requests_the_engine_cannot_take_are_refused_before_generation(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, case: str
) -> None:
    """A prompt id outside the vocabulary, or an overflow of the context window the backend's
    worker declares refused (`REFUSED_OVERFLOWS`), is answered 400 before anything is generated
    (real Dynamo 1.6.1 with vLLM: `fixtures/dynamo-1.6.1/vllm-cpu/completions_token_beyond_vocab
    .json`, `completions_prompt_too_long.json`, `completions_prompt_plus_max_tokens_too_long.json`).
    Sent as a stream and closed at its first event: a deployment that accepts is judged without
    waiting for the whole window to be generated. No sentence of the spec fixes an overflow
    (Dynamo 1.7.0.dev20261026 with vLLM 0.32.0 serves a prompt plus `max_tokens` beyond the
    window, clamped): one served is a release difference flagged on the cell
    (`errors.context_window_refused`), not a failure; a refusal must still be Dynamo's flat 400."""
    body: dict[str, Any] = {"model": rl_target.model, "prompt": PROMPT, "max_tokens": 2}
    if case == "token_beyond_vocabulary":
        body["prompt"] = [*PROMPT, OUT_OF_EVERY_VOCABULARY]
    else:
        if case not in REFUSED_OVERFLOWS.get(rl_target.backend, ()):
            raise Unobservable(
                f"Dynamo's {rl_target.backend} worker does not declare this overflow refused "
                "(its token_budget): the engine may clamp or truncate instead"
            )
        window = context_window(rl_client, rl_target)
        if window is None:
            raise Unobservable(
                "GET /v1/models states no context window for the model (`context_window` or "
                "`max_model_len`): nothing to exceed"
            )
        if case == "prompt_beyond_context_window":
            body["prompt"] = [PROMPT[index % len(PROMPT)] for index in range(window + 1)]
        else:
            body["max_tokens"] = window
    exchange = rl_client.stream(
        "POST",
        rl_target.url("/v1/completions"),
        json_body={**body, "stream": True},
        cancel_after_events=1,
    )
    if case != "token_beyond_vocabulary":
        # no spec sentence fixes an overflow: served (clamped) is a release difference
        served = rl_verdict.check(errors.context_window_refused(exchange.status), exchange)
        if rl_verdict.differs(served):
            return
    parsed = reply_body(exchange)
    rl_verdict.check(errors.status_and_body(exchange.status, parsed, 400), exchange)


@capability(contract.errors.VALIDATION)
def test_a_native_sglang_input_id_outside_the_vocabulary_is_refused(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    """SGLang's `/generate` takes ids the frontend does not check; from Dynamo 1.7.0 the SGLang
    worker refuses one outside the vocabulary with 400 (`Token id N is out of vocabulary at
    input_ids[i]`) instead of handing it to the engine. The body's shape on this route is the
    worker's, so only the status is judged."""
    if rl_target.backend != "sglang":
        raise Unobservable(f"SGLang's native /generate route: {rl_target.backend} has none")
    if not has_request_check(rl_target.release, "sglang.native_input_ids_validated"):
        raise Unobservable(
            f"Dynamo {rl_target.release}'s SGLang worker validates nvext.token_data only; "
            "/generate input_ids are validated from 1.7.0"
        )
    exchange = rl_client.post(
        rl_target.url("/generate"),
        {
            "input_ids": [*PROMPT, OUT_OF_EVERY_VOCABULARY],
            "stream": True,
            "sampling_params": {"max_new_tokens": 2, "temperature": 0},
        },
    )
    rl_verdict.check(
        http.status(exchange.status, 400, exchange.error, exchange.body_preview()), exchange
    )


ARTIFACT = {
    "kind": "generation_artifact",
    "contents": ["selected_logprobs"],
    "mode": "inline_base64",
}
"""A generation artifact delivered in the reply: no destination a refused request could reach."""
NOWHERE = "memory://rl-conformance/refused"
METADATA_UPLOAD_REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    "not_an_object": ({"nvext": {"metadata_upload": NOWHERE}}, "metadata_upload must be an object"),
    "unknown_kind": (
        {"nvext": {"metadata_upload": {**ARTIFACT, "kind": "trajectory"}}},
        "unsupported metadata_upload kind",
    ),
    "legacy_unknown_field": (
        {"nvext": {"metadata_upload": {"url": NOWHERE, "ttl": 60}}},
        "unknown legacy metadata_upload field",
    ),
    "legacy_without_url": (
        {"nvext": {"metadata_upload": {"fallback_url": NOWHERE}}},
        "missing legacy metadata_upload url",
    ),
    "artifact_with_stop_strings": (
        {"stop": ["\n\n"], "nvext": {"metadata_upload": ARTIFACT}},
        "generation_artifact metadata_upload does not support stop strings",
    ),
    "artifact_with_two_choices": (
        {"n": 2, "nvext": {"metadata_upload": ARTIFACT}},
        "generation_artifact metadata_upload requires a single prompt and n = best_of = 1",
    ),
}
"""Requests Dynamo 1.7's frontend refuses, with its reasons
(`fixtures/dynamo-1.7.0.dev20261026/metadata_upload_shapes.json`)."""


@capability(contract.errors.VALIDATION)
@pytest.mark.parametrize("case", sorted(METADATA_UPLOAD_REFUSALS))
def test_a_metadata_upload_the_release_cannot_read_is_refused_with_its_reason(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, case: str
) -> None:
    """Dynamo 1.7 reads `nvext.metadata_upload` as the legacy `{url, fallback_url}` or a
    generation artifact `{kind, contents, mode, destination}`; anything else, and an artifact
    of a request with stop strings or several choices, is refused with 400 and the reason."""
    if not has_request_check(rl_target.release, "frontend.metadata_upload_forms"):
        raise Unobservable(
            f"Dynamo {rl_target.release}'s frontend knows one metadata_upload form ({{url}}); "
            "the generation-artifact form and its refusals are 1.7.0's"
        )
    overrides, reason = METADATA_UPLOAD_REFUSALS[case]
    body = {"model": rl_target.model, "prompt": PROMPT, "max_tokens": 2, **overrides}
    exchange = rl_client.post(rl_target.url("/v1/completions"), body)
    parsed = reply_body(exchange)
    rl_verdict.check(errors.refusal_reason(exchange.status, parsed, reason), exchange)
