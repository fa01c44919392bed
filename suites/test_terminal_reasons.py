"""Terminal reasons verified: a finish reason must be true of the sequence it ends.

A length finish holds exactly max_tokens ids; a stop on a stop id returns the
sequence through that id (the engine's matched token included, as vLLM returns it), the id
`nvext.stop_reason` names; with `ignore_eos` (which in Dynamo clears every stop condition) a choice
cannot stop; a natural finish is never `cancelled`. The stop id is one the deployment's own greedy
run produced, so it is likely to be generated again; the verdict does not count on it (an engine
that is not deterministic at temperature 0 may go elsewhere and end on length, which is true too).
"""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance import Unobservable, contract
from rl_conformance.checks import stream_data, terminal
from rl_conformance.checks.aggregate import aggregate_stream
from rl_conformance.checks.base import MISSING
from rl_conformance.client.http import Client
from rl_conformance.control.requests import chat, completion
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
PROMPT = [512, 733, 1024, 1999, 300]
MAX_TOKENS = 6
SELECTORS = ("completion_token_ids", "stop_reason", "detailed_finish_reason")
ROUTES = ["completions", "completions-stream", "chat", "chat-stream"]


def generate(rl_client: Client, rl_target: Target, route: str, **fields: Any) -> Exchange:
    stream = route.endswith("-stream")
    if route.startswith("chat"):
        return chat(
            rl_client,
            rl_target,
            token_data=PROMPT,
            stream=stream,
            extra_fields=SELECTORS,
            **fields,
        )
    return completion(rl_client, rl_target, PROMPT, stream=stream, extra_fields=SELECTORS, **fields)


def body_of(rl_verdict: Verdict, exchange: Exchange) -> Any:
    if exchange.streamed:
        return aggregate_stream(rl_verdict.events(exchange))
    return rl_verdict.json(exchange)


@capability(contract.stream.TERMINAL_REASON_VERIFIED)
@pytest.mark.parametrize("route", ROUTES)
def test_a_length_finish_holds_max_tokens(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, route: str
) -> None:
    exchange = generate(
        rl_client, rl_target, route, max_tokens=MAX_TOKENS, temperature=0, ignore_eos=True
    )
    body = body_of(rl_verdict, exchange)
    asked = terminal.Asked(MAX_TOKENS, ignore_eos=True)
    rl_verdict.check(
        terminal.terminal_reason_true(asked, terminal.ending_from_body(body)),
        exchange,
    )


def greedy_ids(rl_client: Client, rl_target: Target, rl_verdict: Verdict) -> list[int]:
    exchange = generate(rl_client, rl_target, "completions", max_tokens=MAX_TOKENS, temperature=0)
    ids = rl_verdict.json(exchange).get("nvext", {}).get("completion_token_ids")
    if not isinstance(ids, list) or not ids:
        raise Unobservable(
            "the greedy sequence to pick a stop id from: nvext.completion_token_ids absent "
            f"({exchange.describe()})"
        )
    return ids


@capability(contract.stream.TERMINAL_REASON_VERIFIED)
@pytest.mark.parametrize("route", ROUTES)
def test_a_stop_id_ends_the_sequence_it_stopped(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, route: str
) -> None:
    ids = greedy_ids(rl_client, rl_target, rl_verdict)
    position = next((k for k in range(1, len(ids)) if ids[k] not in ids[:k]), None)
    if position is None:
        raise Unobservable(f"a stop id the greedy run reaches once, after its first token: {ids}")
    stop_id = ids[position]
    exchange = generate(
        rl_client, rl_target, route, max_tokens=MAX_TOKENS, temperature=0, stop_token_ids=[stop_id]
    )
    body = body_of(rl_verdict, exchange)
    ending = terminal.ending_from_body(body)
    asked = terminal.Asked(MAX_TOKENS, stop_token_ids=(stop_id,))
    rl_verdict.check(terminal.terminal_reason_true(asked, ending), exchange)


EOS_WINDOW = 48
"""Tokens a greedy run may take to reach EOS: the toy models reach it within 20."""


@capability(contract.stream.TERMINAL_REASON_VERIFIED)
@pytest.mark.parametrize("route", ROUTES)
def test_a_stop_on_no_requested_condition_ends_on_an_eos_id(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, route: str
) -> None:
    """A `stop` the request's own stop conditions do not explain is the model's EOS, and the
    engine's EOS id is the sequence's last (real Dynamo 1.6.1 returns it, counted in usage:
    `toy-worker/completions_eos_extra_fields_all.json`); SGLang behind Dynamo once dropped it
    while ids, logprobs and usage kept agreeing (ai-dynamo/dynamo #14302). `stop_reason` is not
    asked for, so only the EOS ids can tell."""
    if not rl_target.eos_token_ids:
        raise Unobservable(
            "the model's EOS ids: give --eos-token-id (its generation_config.json eos_token_id)"
        )
    fields = ("completion_token_ids", "detailed_finish_reason")
    stream = route.endswith("-stream")
    if route.startswith("chat"):
        exchange = chat(
            rl_client,
            rl_target,
            token_data=PROMPT,
            stream=stream,
            extra_fields=fields,
            max_tokens=EOS_WINDOW,
            temperature=0,
        )
    else:
        exchange = completion(
            rl_client,
            rl_target,
            PROMPT,
            stream=stream,
            extra_fields=fields,
            max_tokens=EOS_WINDOW,
            temperature=0,
        )
    ending = terminal.ending_from_body(body_of(rl_verdict, exchange))
    if ending.finish_reason != "stop":
        raise Unobservable(
            f"the greedy run did not reach EOS within {EOS_WINDOW} tokens "
            f"(finish_reason {ending.finish_reason!r})"
        )
    asked = terminal.Asked(EOS_WINDOW, eos_token_ids=rl_target.eos_token_ids)
    rl_verdict.check(terminal.terminal_reason_true(asked, ending), exchange)


STOP_WINDOW = 12
"""Tokens the greedy run that a stop string is picked from generates."""
STOP_LENGTH = 3


def stop_string_in(text: str) -> str | None:
    """A run of `STOP_LENGTH` letters that first occurs in the second half of `text`: the greedy
    run reaches it after a few tokens, and letters detokenize alike in a whole text and a piece
    of it (no byte fallback, no whitespace normalisation)."""
    for start in range(len(text) // 2, len(text) - STOP_LENGTH + 1):
        piece = text[start : start + STOP_LENGTH]
        if piece.isalpha() and text.find(piece) == start:
            return piece
    return None


def text_and_ids(rl_verdict: Verdict, exchange: Exchange) -> tuple[str, list[int], Any]:
    """The first choice's text, its ids and the body (merged when streamed)."""
    body = body_of(rl_verdict, exchange)
    texts = stream_data.choice_texts(body)
    ids = terminal.ending_from_body(body).completion_ids
    if not isinstance(texts.get("0"), str) or ids is None:
        raise Unobservable(
            f"a text and nvext.completion_token_ids in the answer ({exchange.describe()})"
        )
    return texts["0"], list(ids), body


@capability(contract.stream.TERMINAL_REASON_VERIFIED)
@pytest.mark.parametrize("route", ROUTES)
def test_a_stop_string_finish_keeps_the_token_that_completed_it(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, route: str
) -> None:
    """A stop string the deployment's own greedy text reaches; the stopped ids must be the first
    ids of the same request without `stop`, and the deployment's text of those ids must reach
    through the matched string (`stream_data.stop_string_sequence`). The unstopped request is
    asked again for exactly as many tokens as the stopped one returned: the text of those ids,
    and a second greedy answer that must agree with the first (an engine that is not
    deterministic at temperature 0 leaves the test inconclusive)."""
    unary = route.removesuffix("-stream")
    fields = {"max_tokens": STOP_WINDOW, "temperature": 0}
    unstopped, unstopped_ids, _ = text_and_ids(
        rl_verdict, generate(rl_client, rl_target, unary, **fields)
    )
    stop = stop_string_in(unstopped)
    if stop is None:
        raise Unobservable(f"a run of {STOP_LENGTH} letters in the greedy text {unstopped!r}")
    exchange = generate(rl_client, rl_target, route, stop=[stop], **fields)
    text, ids, body = text_and_ids(rl_verdict, exchange)
    ending = terminal.ending_from_body(body)
    if ending.finish_reason != "stop":
        raise Unobservable(
            f"the stop string {stop!r}, which the greedy text reaches, did not end the request "
            f"(finish_reason {ending.finish_reason!r})"
        )
    reference, reference_ids, _ = text_and_ids(
        rl_verdict,
        generate(rl_client, rl_target, unary, max_tokens=max(len(ids), 1), temperature=0),
    )
    if reference_ids != unstopped_ids[: len(reference_ids)]:
        raise Unobservable(
            f"two greedy answers to one request differ ({unstopped_ids} then {reference_ids}): "
            "the deployment is not deterministic at temperature 0"
        )
    run = stream_data.StopStringRun(
        stops=(stop,),
        ids=ids,
        text=text,
        stop_reason=MISSING if ending.stop_reason is None else ending.stop_reason,
        reference_ids=reference_ids if ids else [],
        reference_text=reference if ids else "",
        unstopped_text=unstopped,
    )
    rl_verdict.check(stream_data.stop_string_sequence(run), exchange)
