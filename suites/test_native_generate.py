"""Native RL generation routes: SGLang's streaming `/generate`, vLLM's experimental unary route."""

from __future__ import annotations

import pytest

from rl_conformance import FeatureAbsent
from rl_conformance.checks import logprobs, streaming
from rl_conformance.client.http import Client
from rl_conformance.control.requests import sglang_generate
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
PROMPT = [640, 1024, 777, 1800, 512]
ABSENT_STATUSES = {404, 405, 501}


def absent_if_not_served(exchange: Exchange, route: str) -> None:
    if exchange.status in ABSENT_STATUSES:
        raise FeatureAbsent(f"{route} answered HTTP {exchange.status}")


@capability("generate.native_route")
def test_native_generation_route_streams_to_a_terminal(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    if rl_target.backend == "vllm":
        body = {
            "model": rl_target.model,
            "token_ids": PROMPT,
            "sampling_params": {"max_tokens": 4, "temperature": 0},
        }
        exchange = rl_client.post(rl_target.url("/inference/v1/generate"), body)
        absent_if_not_served(exchange, "POST /inference/v1/generate")
        rl_verdict.json(exchange)
        return
    exchange = sglang_generate(rl_client, rl_target, PROMPT, sampling_params={"max_new_tokens": 4})
    absent_if_not_served(exchange, "POST /generate")
    rl_verdict.events(exchange, schema="sglang-generate-chunk")
    assert exchange.state is not None
    rl_verdict.check(
        streaming.terminal_success(exchange.state.value, exchange.state_reason), exchange
    )


@capability("generate.sglang_logprob_alignment")
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
