"""Streaming terminal states: one terminal per choice, nothing after it, `[DONE]` last."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance import contract
from rl_conformance.checks import streaming
from rl_conformance.client.http import Client
from rl_conformance.control.requests import chat, completion
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
PROMPT = [512, 733, 1024, 1999, 300]
SHAPES = ["completions-n1", "completions-n2", "chat-n1", "chat-usage"]


def open_stream(rl_client: Client, rl_target: Target, shape: str) -> tuple[Exchange, int, bool]:
    """A stream of the given shape: the exchange, its number of choices, and whether it is chat."""
    if shape == "completions-n1":
        return (
            completion(
                rl_client,
                rl_target,
                PROMPT,
                max_tokens=5,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            ),
            1,
            False,
        )
    if shape == "completions-n2":
        return (
            completion(
                rl_client,
                rl_target,
                PROMPT,
                max_tokens=5,
                n=2,
                temperature=0.7,
                seed=3,
                stream=True,
            ),
            2,
            False,
        )
    if shape == "chat-n1":
        return (
            chat(rl_client, rl_target, token_data=PROMPT, max_tokens=5, temperature=0, stream=True),
            1,
            True,
        )
    return (
        chat(
            rl_client,
            rl_target,
            content="stream please",
            max_tokens=5,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        ),
        1,
        True,
    )


def payloads_of(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, shape: str
) -> tuple[list[Any], Exchange, int, bool]:
    exchange, choices, is_chat = open_stream(rl_client, rl_target, shape)
    return rl_verdict.events(exchange), exchange, choices, is_chat


@capability(contract.stream.SINGLE_TERMINAL)
@pytest.mark.parametrize("shape", SHAPES)
def test_each_choice_terminates_exactly_once(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, shape: str
) -> None:
    payloads, exchange, choices, _ = payloads_of(rl_client, rl_target, rl_verdict, shape)
    rl_verdict.check(streaming.single_terminal(payloads, choices), exchange)


@capability(contract.stream.NOTHING_AFTER_TERMINAL)
@pytest.mark.parametrize("shape", SHAPES)
def test_nothing_follows_a_terminal_but_usage(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, shape: str
) -> None:
    payloads, exchange, _, _ = payloads_of(rl_client, rl_target, rl_verdict, shape)
    rl_verdict.check(streaming.nothing_after_terminal(payloads), exchange)


@capability(contract.stream.DONE_LAST)
@pytest.mark.parametrize("shape", SHAPES)
def test_stream_ends_with_done(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, shape: str
) -> None:
    payloads, exchange, _, _ = payloads_of(rl_client, rl_target, rl_verdict, shape)
    rl_verdict.check(streaming.done_last(payloads), exchange)


@capability(contract.stream.FINISH_REASON)
@pytest.mark.parametrize("shape", SHAPES)
def test_streamed_finish_reasons_are_recognised(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, shape: str
) -> None:
    payloads, exchange, _, is_chat = payloads_of(rl_client, rl_target, rl_verdict, shape)
    rl_verdict.check(streaming.finish_reason_recognised(payloads, chat=is_chat), exchange)


@capability(contract.stream.FINISH_REASON)
@pytest.mark.parametrize("route", ["completions", "chat"])
def test_unary_choices_carry_a_recognised_finish_reason(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, route: str
) -> None:
    if route == "completions":
        exchange = completion(rl_client, rl_target, PROMPT, max_tokens=4, temperature=0)
    else:
        exchange = chat(rl_client, rl_target, token_data=PROMPT, max_tokens=4, temperature=0)
    body = rl_verdict.json(exchange)
    rl_verdict.check(streaming.unary_finish_reason(body), exchange)
    rl_verdict.check(streaming.finish_reason_recognised(body, chat=route == "chat"), exchange)


@capability(contract.stream.TERMINAL_SUCCESS)
@pytest.mark.parametrize("shape", SHAPES)
def test_complete_streams_reach_terminal_success(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, shape: str
) -> None:
    exchange, _, _ = open_stream(rl_client, rl_target, shape)
    rl_verdict.status(exchange)
    assert exchange.state is not None
    rl_verdict.check(
        streaming.terminal_success(exchange.state.value, exchange.state_reason), exchange
    )


@capability(contract.stream.FINISH_REASON)
@pytest.mark.parametrize("stream", [False, True])
def test_no_rollout_is_silently_cancelled(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, stream: bool
) -> None:
    exchange = completion(
        rl_client,
        rl_target,
        PROMPT,
        max_tokens=6,
        temperature=0,
        stream=stream,
        extra_fields=("detailed_finish_reason",),
    )
    found = rl_verdict.events(exchange) if stream else rl_verdict.json(exchange)
    rl_verdict.check(streaming.no_silent_cancellation(found), exchange)


STOPS = ["e", "the", "a"]


@capability(contract.stream.FINISH_REASON)
@pytest.mark.parametrize("selected", [False, True])
@pytest.mark.parametrize("stream", [False, True])
def test_matched_stop_is_reported_only_under_nvext(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, stream: bool, selected: bool
) -> None:
    """A stop string that any text soon matches; the matched stop comes back as
    `nvext.stop_reason` when the selector asks for it, and never inside a choice."""
    exchange = completion(
        rl_client,
        rl_target,
        PROMPT,
        max_tokens=24,
        temperature=0,
        stop=STOPS,
        stream=stream,
        extra_fields=("stop_reason",) if selected else ("completion_token_ids",),
    )
    found = rl_verdict.events(exchange) if stream else rl_verdict.json(exchange)
    rl_verdict.check(streaming.stop_reason_placement(found, STOPS, selected), exchange)
