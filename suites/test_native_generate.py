"""Native RL generation routes: SGLang's streaming `/generate`, vLLM's experimental unary route."""

from __future__ import annotations

import pytest

from rl_conformance import FeatureAbsent, contract
from rl_conformance.checks import logprobs, streaming, tokens
from rl_conformance.checks.base import get_path
from rl_conformance.client.http import Client
from rl_conformance.control.requests import completion, sglang_generate
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
PROMPT = [640, 1024, 777, 1800, 512]
MAX_TOKENS = 4
ABSENT_STATUSES = {404, 405, 501}


def absent_if_not_served(exchange: Exchange, route: str) -> None:
    if exchange.status in ABSENT_STATUSES:
        raise FeatureAbsent(f"{route} answered HTTP {exchange.status}")


def openai_ids(rl_client: Client, rl_target: Target, rl_verdict: Verdict) -> list[int]:
    """The same greedy generation through /v1/completions: the ids a native route must match."""
    exchange = completion(
        rl_client,
        rl_target,
        PROMPT,
        max_tokens=MAX_TOKENS,
        temperature=0,
        extra_fields=("completion_token_ids",),
    )
    body = rl_verdict.json(exchange)
    rl_verdict.check(tokens.completion_ids_present(body), exchange)
    return list(body["nvext"]["completion_token_ids"])


@capability(contract.generate.NATIVE_ROUTE)
def test_native_generation_route_returns_the_engine_ids(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    """A native route answers with a terminal and the engine's own ids: the same greedy
    sequence `/v1/completions` returns (vLLM: `choices[0].token_ids` of the unary
    `/inference/v1/generate`; SGLang: the `output_ids` of `/generate`'s stream)."""
    if rl_target.backend == "vllm":
        body = {
            "model": rl_target.model,
            "token_ids": PROMPT,
            "sampling_params": {"max_tokens": MAX_TOKENS, "temperature": 0},
        }
        exchange = rl_client.post(rl_target.url("/inference/v1/generate"), body)
        absent_if_not_served(exchange, "POST /inference/v1/generate")
        native = get_path(rl_verdict.json(exchange), "choices", 0, "token_ids")
        expected = openai_ids(rl_client, rl_target, rl_verdict)
        rl_verdict.check(
            tokens.native_ids_agree("choices[0].token_ids", native, expected), exchange
        )
        return
    exchange = sglang_generate(
        rl_client,
        rl_target,
        PROMPT,
        sampling_params={"max_new_tokens": MAX_TOKENS, "temperature": 0},
    )
    absent_if_not_served(exchange, "POST /generate")
    events = rl_verdict.events(exchange, schema="sglang-generate-chunk")
    assert exchange.state is not None
    rl_verdict.check(
        streaming.terminal_success(exchange.state.value, exchange.state_reason), exchange
    )
    expected = openai_ids(rl_client, rl_target, rl_verdict)
    rl_verdict.check(
        tokens.native_ids_agree("output_ids", tokens.native_sequence(events), expected), exchange
    )


@capability(contract.generate.SGLANG_LOGPROB_ALIGNMENT)
def test_sglang_logprob_triples_align(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    exchange = sglang_generate(
        rl_client,
        rl_target,
        PROMPT,
        return_logprob=True,
        logprob_start_len=0,
        sampling_params={"max_new_tokens": 5, "temperature": 0},
    )
    absent_if_not_served(exchange, "POST /generate")
    payloads = rl_verdict.events(exchange, schema="sglang-generate-chunk")
    finals = [
        payload
        for payload in payloads
        if isinstance(payload, dict) and (payload.get("meta_info") or {}).get("finish_reason")
    ]
    if not finals:
        raise FeatureAbsent("POST /generate stream carried no finished event")
    rl_verdict.check(logprobs.sglang_alignment(finals[-1], PROMPT), exchange)
