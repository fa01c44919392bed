"""Token authority: the engine's token ids reach the trainer unchanged and complete."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from rl_conformance import Unobservable, contract
from rl_conformance.checks import aggregate_stream, discovery, stream_data, tokens
from rl_conformance.client.http import Client
from rl_conformance.control.requests import chat, completion
from rl_conformance.model import strategies
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
IDS = ("completion_token_ids", "prompt_token_ids")
PROMPT = [901, 445, 1203, 377, 1500]


@capability(contract.tokens.TOKEN_INPUT)
def test_token_arrays_are_accepted_on_both_openai_routes(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    exchange = completion(rl_client, rl_target, PROMPT, max_tokens=4, temperature=0)
    rl_verdict.json(exchange, schema="completion")
    exchange = chat(rl_client, rl_target, token_data=PROMPT, max_tokens=4, temperature=0)
    rl_verdict.json(exchange, schema="chat-completion")


@capability(contract.tokens.PROMPT_IDS_ECHO)
@given(prompt=strategies.prompt_ids)
def test_prompt_token_ids_echo_the_token_array(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, prompt: list[int]
) -> None:
    exchange = completion(
        rl_client, rl_target, prompt, max_tokens=2, temperature=0, extra_fields=IDS
    )
    body = rl_verdict.json(exchange, schema="completion")
    rl_verdict.check(tokens.prompt_ids_echo(body, prompt), exchange)


@capability(contract.tokens.PROMPT_IDS_ECHO)
def test_prompt_token_ids_echo_chat_token_data(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    exchange = chat(
        rl_client, rl_target, token_data=PROMPT, max_tokens=2, temperature=0, extra_fields=IDS
    )
    body = rl_verdict.json(exchange, schema="chat-completion")
    rl_verdict.check(tokens.prompt_ids_echo(body, PROMPT), exchange)


@capability(contract.tokens.COMPLETION_IDS)
@given(prompt=strategies.prompt_ids, max_tokens=strategies.max_tokens)
def test_completion_token_ids_are_returned(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, prompt: list[int], max_tokens: int
) -> None:
    exchange = completion(
        rl_client, rl_target, prompt, max_tokens=max_tokens, temperature=0, extra_fields=IDS
    )
    body = rl_verdict.json(exchange, schema="completion")
    rl_verdict.check(tokens.completion_ids_present(body), exchange)


@capability(contract.tokens.COMPLETION_IDS)
def test_completion_token_ids_are_returned_on_chat(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    exchange = chat(
        rl_client, rl_target, token_data=PROMPT, max_tokens=4, temperature=0, extra_fields=IDS
    )
    body = rl_verdict.json(exchange, schema="chat-completion")
    rl_verdict.check(tokens.completion_ids_present(body), exchange)


@capability(contract.tokens.CHOICE_COUNT)
@pytest.mark.parametrize("n", [1, 3])
def test_response_has_the_requested_number_of_choices(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, n: int
) -> None:
    exchange = completion(rl_client, rl_target, PROMPT, max_tokens=3, n=n, temperature=0.8, seed=7)
    body = rl_verdict.json(exchange, schema="completion")
    rl_verdict.check(tokens.choice_count(body, n), exchange)


@capability(contract.tokens.USAGE_CONSISTENT)
@given(prompt=strategies.prompt_ids, max_tokens=strategies.max_tokens)
def test_usage_counts_agree_with_token_ids(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, prompt: list[int], max_tokens: int
) -> None:
    exchange = completion(
        rl_client, rl_target, prompt, max_tokens=max_tokens, temperature=0, extra_fields=IDS
    )
    body = rl_verdict.json(exchange, schema="completion")
    rl_verdict.check(tokens.completion_ids_present(body), exchange)
    rl_verdict.check(
        tokens.usage_consistent(body, prompt, body["nvext"]["completion_token_ids"]), exchange
    )


def generate_ids(
    rl_client: Client,
    rl_target: Target,
    route: str,
    prompt: list[int],
    max_tokens: int,
    **extra: Any,
) -> Exchange:
    """A greedy generation of `prompt` through `/v1/completions` or `/v1/chat/completions`
    (the token prompt as `nvext.token_data`)."""
    if route == "chat":
        return chat(
            rl_client,
            rl_target,
            token_data=prompt,
            max_tokens=max_tokens,
            temperature=0,
            extra_fields=IDS,
            **extra,
        )
    return completion(
        rl_client,
        rl_target,
        prompt,
        max_tokens=max_tokens,
        temperature=0,
        extra_fields=IDS,
        **extra,
    )


@capability(contract.tokens.STREAM_CONCAT)
@pytest.mark.parametrize("route", ["completions", "chat"])
@given(prompt=strategies.prompt_ids, max_tokens=strategies.max_tokens)
def test_streamed_ids_concatenate_to_unary_ids(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    route: str,
    prompt: list[int],
    max_tokens: int,
) -> None:
    schema = "chat-completion" if route == "chat" else "completion"
    unary = generate_ids(rl_client, rl_target, route, prompt, max_tokens)
    body = rl_verdict.json(unary, schema=schema)
    rl_verdict.check(tokens.completion_ids_present(body), unary)
    streamed = generate_ids(rl_client, rl_target, route, prompt, max_tokens, stream=True)
    payloads = rl_verdict.events(streamed, schema=f"{schema}-chunk")
    rl_verdict.check(
        tokens.stream_concat(payloads, body["nvext"]["completion_token_ids"]), streamed
    )


@capability(contract.tokens.USAGE_CONSISTENT)
@pytest.mark.parametrize("route", ["completions", "chat"])
def test_the_streamed_usage_chunk_counts_the_streamed_ids(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, route: str
) -> None:
    """The usage chunk `stream_options.include_usage` asks for counts the ids the stream
    carried, and the prompt the unary answer to the same request counted."""
    schema = "chat-completion" if route == "chat" else "completion"
    unary = generate_ids(rl_client, rl_target, route, PROMPT, 6)
    body = rl_verdict.json(unary, schema=schema)
    streamed = generate_ids(
        rl_client,
        rl_target,
        route,
        PROMPT,
        6,
        stream=True,
        stream_options={"include_usage": True},
    )
    payloads = rl_verdict.events(streamed, schema=f"{schema}-chunk")
    rl_verdict.check(tokens.completion_ids_present(aggregate_stream(payloads)), streamed)
    rl_verdict.check(stream_data.stream_usage_counts(payloads, body), streamed)


SEEDED: dict[str, Any] = {"max_tokens": 6, "n": 2, "temperature": 0.8, "seed": 7}
"""Two sampled choices under a fixed seed (Dynamo refuses n > 1 at temperature 0 and with
`completion_token_ids`: `fixtures/dynamo-1.6.1/vllm-cpu/completions_n2.json`)."""


def seeded(rl_client: Client, rl_target: Target, route: str, stream: bool = False) -> Exchange:
    if route == "chat":
        return chat(rl_client, rl_target, token_data=PROMPT, stream=stream, **SEEDED)
    return completion(rl_client, rl_target, PROMPT, stream=stream, **SEEDED)


def refused(exchange: Exchange, what: str) -> None:
    """A request refusal (4xx) of what the rule needs: n > 1 is the choice count's row, not
    this one's, so the rule is left unobserved."""
    if 400 <= exchange.status < 500:
        raise Unobservable(
            f"{what}: answered HTTP {exchange.status} ({exchange.body_preview()}), so no "
            "streamed choice can be tied to its index"
        )


@capability(contract.tokens.STREAM_CONCAT)
@pytest.mark.parametrize("route", ["completions", "chat"])
def test_each_streamed_choice_is_the_unary_choice_of_its_index(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, route: str
) -> None:
    """With n = 2 under one seed, each streamed index carries the unary answer's choice of that
    index. Only where the deployment is seed-deterministic: the unary answer is asked twice
    first, and two different answers leave the test inconclusive."""
    schema = "chat-completion" if route == "chat" else "completion"
    first, second = (seeded(rl_client, rl_target, route) for _ in range(2))
    refused(first, f"unary n=2 under seed {SEEDED['seed']} on {route}")
    unary = rl_verdict.json(first, schema=schema)
    again = rl_verdict.json(second, schema=schema)
    texts = stream_data.choice_texts(unary)
    if texts != stream_data.choice_texts(again):
        raise Unobservable(
            f"a streamed choice's index: two unary n=2 answers under seed {SEEDED['seed']} "
            f"differ ({texts} then {stream_data.choice_texts(again)}), so the deployment is not "
            "seed-deterministic and no answer says what each index must carry"
        )
    streamed = seeded(rl_client, rl_target, route, stream=True)
    refused(streamed, f"a stream of n=2 under seed {SEEDED['seed']} on {route}")
    merged = aggregate_stream(rl_verdict.events(streamed, schema=f"{schema}-chunk"))
    rl_verdict.check(stream_data.stream_choices_match(merged, unary), streamed)


@capability(contract.tokens.TEXT_TOKEN_EQUIVALENCE)
@given(text=strategies.prompt_text)
def test_text_prompt_and_its_token_ids_generate_alike(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, text: str
) -> None:
    from_text = completion(
        rl_client, rl_target, text, max_tokens=6, temperature=0, extra_fields=IDS
    )
    body = rl_verdict.json(from_text, schema="completion")
    rl_verdict.check(tokens.completion_ids_present(body), from_text)
    rl_verdict.check(tokens.prompt_ids_present(body), from_text)
    effective = body["nvext"]["prompt_token_ids"]
    from_ids = completion(
        rl_client, rl_target, effective, max_tokens=6, temperature=0, extra_fields=IDS
    )
    other = rl_verdict.json(from_ids, schema="completion")
    rl_verdict.check(tokens.completion_ids_present(other), from_ids)
    rl_verdict.check(
        tokens.text_token_equivalence(
            body["nvext"]["completion_token_ids"], other["nvext"]["completion_token_ids"]
        ),
        from_ids,
    )


@capability(contract.tokens.MODEL_IDENTITY)
def test_model_identity_agrees_everywhere(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    assert rl_target.model is not None
    worker_models: list[str] = []
    if rl_target.rl_url:
        listing = rl_client.get(rl_target.rl("/v1/rl/workers"))
        body = rl_verdict.json(listing)
        worker_models = [
            worker["model"]
            for worker in discovery.workers_of(body)
            if isinstance(worker.get("model"), str)
        ]
    unary = completion(rl_client, rl_target, PROMPT, max_tokens=2, temperature=0)
    rl_verdict.check(
        tokens.model_identity(rl_verdict.json(unary).get("model"), rl_target.model, worker_models),
        unary,
    )
    streamed = completion(rl_client, rl_target, PROMPT, max_tokens=2, temperature=0, stream=True)
    merged = aggregate_stream(rl_verdict.events(streamed))
    rl_verdict.check(tokens.model_identity(merged.get("model"), rl_target.model), streamed)


@capability(contract.tokens.INPUT_TOKENS_ESTIMATE)
def test_input_tokens_preflight_estimate(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    exchange = rl_client.post(
        rl_target.url("/v1/responses/input_tokens"),
        {"model": rl_target.model, "input": "estimate the size of this prompt"},
    )
    rl_verdict.check(tokens.input_tokens_estimate(rl_verdict.json(exchange)), exchange)


@capability(contract.tokens.COMPLETION_IDS)
def test_raw_engine_ids_agree_with_the_named_field(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    exchange = completion(
        rl_client,
        rl_target,
        PROMPT,
        max_tokens=6,
        temperature=0,
        extra_fields=(*IDS, "engine_data"),
    )
    body = rl_verdict.json(exchange, schema="completion")
    rl_verdict.check(tokens.completion_ids_present(body), exchange)
    rl_verdict.check(tokens.engine_data_agreement(body), exchange)
