"""Logprob alignment: selected, top-k and prompt logprobs line up with the token ids."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rl_conformance import FeatureAbsent, contract
from rl_conformance.checks import aggregate_stream, logprobs, tokens
from rl_conformance.client.http import Client
from rl_conformance.control.requests import chat, completion
from rl_conformance.model import strategies
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
IDS = ("completion_token_ids", "prompt_token_ids")


def generate_with_logprobs(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    *,
    route: str,
    prompt: list[int],
    max_tokens: int,
    k: int,
    echo: bool,
    stream: bool,
) -> tuple[dict[str, Any], list[int], Any]:
    """One generation with logprobs on the chosen route; returns the (aggregated) body, the
    generated ids and the exchange."""
    if route == "completions":
        exchange = completion(
            rl_client,
            rl_target,
            prompt,
            max_tokens=max_tokens,
            temperature=0,
            logprobs=k,
            echo=echo,
            stream=stream,
            extra_fields=IDS,
        )
        schema = "completion"
    else:
        exchange = chat(
            rl_client,
            rl_target,
            token_data=prompt,
            max_tokens=max_tokens,
            temperature=0,
            logprobs=True,
            top_logprobs=k,
            stream=stream,
            extra_fields=IDS,
        )
        schema = "chat-completion"
    if stream:
        body = aggregate_stream(rl_verdict.events(exchange, schema=f"{schema}-chunk"))
    else:
        body = rl_verdict.json(exchange, schema=schema)
    rl_verdict.check(tokens.completion_ids_present(body), exchange)
    rl_verdict.check(logprobs.present(body), exchange)
    return body, body["nvext"]["completion_token_ids"], exchange


generation = st.fixed_dictionaries(
    {
        "route": strategies.routes,
        "prompt": strategies.prompt_ids,
        "max_tokens": strategies.max_tokens,
        "k": strategies.top_k,
        "echo": st.booleans(),
        "stream": st.booleans(),
    }
)


@capability(contract.logprobs.SELECTED_ALIGNMENT)
@given(shape=generation)
def test_selected_logprobs_align_with_generated_ids(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, shape: dict[str, Any]
) -> None:
    body, ids, exchange = generate_with_logprobs(rl_client, rl_target, rl_verdict, **shape)
    rl_verdict.check(logprobs.selected_alignment(body, ids), exchange)


@capability(contract.logprobs.FINITE_NONPOSITIVE)
@given(shape=generation)
def test_logprobs_are_finite_and_nonpositive(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, shape: dict[str, Any]
) -> None:
    body, _, exchange = generate_with_logprobs(rl_client, rl_target, rl_verdict, **shape)
    rl_verdict.check(logprobs.finite_nonpositive(body), exchange)


@capability(contract.logprobs.TOPK_CONSISTENT)
@given(shape=generation)
def test_top_logprobs_are_consistent(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, shape: dict[str, Any]
) -> None:
    """k is what was asked (completions `logprobs: k`, chat `top_logprobs: k`); at k = 0 the APIs
    allow no alternative at all (OpenAI, and the real Dynamo chat path) or the sampled token only
    (vLLM completions semantics, which Dynamo keeps)."""
    body, _, exchange = generate_with_logprobs(rl_client, rl_target, rl_verdict, **shape)
    rl_verdict.check(logprobs.topk_consistent(body, shape["k"], greedy=True), exchange)


CHAT_TOP_K = 3


@capability(contract.logprobs.TOPK_CONSISTENT)
@pytest.mark.parametrize("stream", [False, True])
def test_chat_top_logprobs_hold_k_entries(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, stream: bool
) -> None:
    """Chat `top_logprobs: k` lists the k most likely alternatives at every position, streamed
    or not; a list one short has lost one (`logprobs.topk_consistent`)."""
    body, _, exchange = generate_with_logprobs(
        rl_client,
        rl_target,
        rl_verdict,
        route="chat",
        prompt=[640, 1024, 777, 1800, 512],
        max_tokens=4,
        k=CHAT_TOP_K,
        echo=False,
        stream=stream,
    )
    rl_verdict.check(logprobs.topk_consistent(body, CHAT_TOP_K, greedy=True), exchange)


def request_prompt_logprobs(rl_client: Client, rl_target: Target, prompt: list[int], k: int) -> Any:
    return completion(
        rl_client,
        rl_target,
        prompt,
        max_tokens=2,
        temperature=0,
        prompt_logprobs=k,
        extra_fields=("prompt_logprobs", "prompt_token_ids"),
    )


@pytest.fixture
def prompt_logprobs_offered(rl_client: Client, rl_target: Target) -> None:
    """One probe before the property runs: an absent feature is reported once, not shrunk."""
    exchange = request_prompt_logprobs(rl_client, rl_target, [640, 1024, 777], 1)
    try:
        found = exchange.json().get("nvext", {}).get("prompt_logprobs")
    except (ValueError, AttributeError):
        return
    if exchange.status == 200 and found is None:
        raise FeatureAbsent(
            "completions with prompt_logprobs and the prompt_logprobs selector "
            "returned no nvext.prompt_logprobs"
        )


@capability(contract.logprobs.PROMPT_ALIGNMENT)
@given(prompt=strategies.prompt_ids, k=st.integers(min_value=1, max_value=3))
def test_prompt_logprobs_keep_position_zero_undefined(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    prompt_logprobs_offered: None,
    prompt: list[int],
    k: int,
) -> None:
    exchange = request_prompt_logprobs(rl_client, rl_target, prompt, k)
    body = rl_verdict.json(exchange, schema="completion")
    found = body.get("nvext", {}).get("prompt_logprobs")
    rl_verdict.check(
        logprobs.prompt_alignment(found, prompt, where="nvext.prompt_logprobs"), exchange
    )


@capability(contract.logprobs.PROMPT_ALIGNMENT)
def test_chat_prompt_logprobs_keep_position_zero_undefined(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    prompt = [640, 1024, 777, 1800, 512, 333]
    exchange = chat(
        rl_client, rl_target, token_data=prompt, max_tokens=2, temperature=0, prompt_logprobs=1
    )
    body = rl_verdict.json(exchange, schema="chat-completion")
    found = body.get("prompt_logprobs")
    if found is None:
        raise FeatureAbsent("chat with prompt_logprobs returned no top-level prompt_logprobs")
    rl_verdict.check(logprobs.prompt_alignment(found, prompt), exchange)
