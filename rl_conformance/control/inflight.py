"""A stream kept in flight while a control step is taken, and the evidence of what it had
delivered at each moment that matters.

A control-plane verdict about requests in flight must not depend on how fast the engine
generates: a real engine may finish a 40-token stream before a pause lands, a fake may not. So
the stream asks for far more tokens than any step takes (`IN_FLIGHT_TOKENS`, bounded by the
model's context window), the step is sent only once the first token arrived, and the stream's
own counts, read when the step was sent and when it was answered, say whether it really was in
flight. When it was not, the test is inconclusive (`Unobservable`), never passed or failed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..checks import streaming, terminal
from ..client.http import Client
from ..client.progress import StreamProgress
from ..model.prompts import stated_context_window
from ..model.target import Target
from ..model.verdict import Unobservable, Verdict
from ..wire.exchange import Exchange
from ..wire.stream_state import openai_terminals, sglang_terminals

IN_FLIGHT_TOKENS = 512
"""Tokens a stream in flight asks for: its control step lands milliseconds after the first token,
and 512 tokens take a second or more on any engine (9 s on this CPU)."""
FIRST_TOKEN_S = 60.0
"""How long a stream may take to deliver its first token (a cold CPU engine takes 20 s)."""
STREAM_DEADLINE_S = 300.0
BACKLOG_FACTOR = 3.0
MIN_INTERVAL_S = 0.001
DECODE_TOKENS = 8
"""Tokens a stream must have delivered after its first for its decoding pace to be trusted."""
DECODE_WAIT_S = 1.0
"""The longest a control step waits for a stream to show its decoding pace (`show_pace`)."""


class EndedBeforeStep(Unobservable):
    """The stream had run to its end, faithfully, by the time its first token was read: the
    control step it was started for could not find it in flight."""


@dataclass(frozen=True)
class Mark:
    """What the stream had delivered at one moment: tokens received (events, for a native stream,
    `unit`) and whether it had ended."""

    tokens: int
    ended: bool
    unit: str = "tokens"
    at: float = 0.0
    """When it was read (monotonic seconds)."""

    def describe(self) -> str:
        return f"{self.tokens} {self.unit}{' (ended)' if self.ended else ''}"


def in_flight_budget(client: Client, target: Target, prompt_tokens: int) -> int:
    """`IN_FLIGHT_TOKENS`, within the context window /v1/models states for the model (Dynamo's
    `context_window`, vLLM's `max_model_len`) when it states one."""
    try:
        window = stated_context_window(client.get(target.url("/v1/models")).json(), target.model)
    except ValueError:
        window = None
    if window is not None and window > prompt_tokens + 16:
        return min(IN_FLIGHT_TOKENS, window - prompt_tokens - 8)
    return IN_FLIGHT_TOKENS


class InFlightStream:
    """A greedy completion stream in a thread, pinned to one worker when its identity is known
    (`nvext.backend_instance_id` and the worker header), asking for `max_tokens` with EOS
    ignored so that it can only end by its length, an abort, or a failure.

    With `native=True` it is SGLang's own `POST /generate` stream instead (pinned by the worker
    header alone; its events carry no `nvext`), and a `Mark` counts its events, each of which
    carries at least one token."""

    def __init__(
        self,
        client: Client,
        target: Target,
        prompt: list[int],
        *,
        instance_id: int | None,
        max_tokens: int,
        native: bool = False,
        fields: tuple[str, ...] = (),
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """`fields`: more `nvext.extra_fields` to ask for; `options`: more request fields
        (`logprobs`, `stream_options`), for a completion stream."""
        body: dict[str, Any]
        headers: dict[str, str] = {}
        if instance_id is not None:
            headers["x-dynamo-worker-instance-id"] = str(instance_id)
        if native:
            body = {
                "input_ids": prompt,
                "stream": True,
                "sampling_params": {
                    "max_new_tokens": max_tokens,
                    "temperature": 0,
                    "ignore_eos": True,
                },
            }
            route, detector = "/generate", sglang_terminals
        else:
            body = {
                "model": target.model,
                "prompt": prompt,
                "max_tokens": max_tokens,
                "temperature": 0,
                "ignore_eos": True,
                "stream": True,
                "nvext": {
                    "extra_fields": [
                        "completion_token_ids",
                        "engine_data",
                        "detailed_finish_reason",
                        *fields,
                    ]
                },
                **(options or {}),
            }
            if instance_id is not None:
                body["nvext"]["backend_instance_id"] = instance_id
            route, detector = "/v1/completions", openai_terminals
        self.native = native
        self.max_tokens = max_tokens
        self.started_at = time.monotonic()
        self.first: Mark | None = None
        """The stream when its first token was read (`start_and_wait_first_token`)."""
        self.progress = StreamProgress()
        self.result: dict[str, Exchange] = {}
        self.failure: Exception | None = None
        """What the stream's request raised instead of answering (a budget spent, a generation
        a read-only run refuses, an open breaker): raised again where its exchange is read."""

        def send() -> None:
            try:
                self.result["exchange"] = client.stream(
                    "POST",
                    target.url(route),
                    json_body=body,
                    headers=headers,
                    detector=detector,
                    deadline_s=STREAM_DEADLINE_S,
                    progress=self.progress,
                )
            except Exception as exc:
                self.failure = exc
                self.progress.end()  # nobody waits a deadline for a stream that never started

        # daemon: never holds the process open; every user waits for it with a bound
        self.thread = threading.Thread(daemon=True, target=send)

    def start_and_wait_first_token(self, verdict: Verdict | None = None) -> Mark:
        """Start the stream and return once its first token arrived. A stream the deployment
        refused or did not answer as a stream fails `verdict` (when given) with its evidence;
        one that ended, or delivered nothing, before its first token is `Unobservable`."""
        self.started_at = time.monotonic()
        self.thread.start()
        if self.native:
            self.progress.wait_for_events(1, FIRST_TOKEN_S)
        else:
            self.progress.wait_for_tokens(1, FIRST_TOKEN_S)
        mark = self.first = self.mark()
        if self.failure is not None:
            raise self.failure
        if mark.ended and verdict is not None:
            # Ended before the step: a stream that broke fails; only a faithful one that was
            # simply over already leaves the test inconclusive.
            self.wait()
            exchange = self.exchange
            verdict.folded(exchange)
            state = exchange.state.value if exchange.state else "none"
            verdict.check(streaming.terminal_success(state, exchange.state_reason), exchange)
        if mark.tokens == 0:
            raise Unobservable(
                f"a {self.max_tokens}-token stream delivered no token "
                f"{'before it ended' if mark.ended else f'within {FIRST_TOKEN_S:g} s'}: "
                "no request was in flight to observe"
            )
        if mark.ended:
            raise EndedBeforeStep(
                f"a {self.max_tokens}-token stream ended ({mark.describe()}) before the control "
                "step could be sent: no request was in flight to observe"
            )
        return mark

    def mark(self) -> Mark:
        events, tokens, ended = self.progress.counts()
        if self.native:
            return Mark(events, ended, "events", time.monotonic())
        return Mark(tokens, ended, at=time.monotonic())

    def maybe_read_late(self, sent: Mark, answered: Mark, end: Mark) -> bool:
        """Whether what the stream delivered between a pause's answer and `end` may have been
        generated before the pause took hold and read late. Where in a stream a pause lands is
        seen only by the engine, and what the client counts lags what the engine generated when
        the client is slow. Either sign is enough: the pause call was in flight for at least as
        many tokens as arrived after it was answered (it may have landed anywhere among them),
        or they arrived much faster than the stream ever ran (a backlog)."""
        during_call = answered.tokens - sent.tokens
        after_answer = end.tokens - answered.tokens
        return during_call >= after_answer or self.outpaced(sent, answered, end)

    def outpaced(self, before: Mark, since: Mark, end: Mark) -> bool:
        """Whether what arrived between `since` and `end` came much faster (`BACKLOG_FACTOR`)
        than the stream ran before `before`: tokens the engine generated earlier and the client
        read late (a loaded client, buffered chunks), not generated in that interval.

        The stream's pace is its tokens over the time since it was sent, first-token latency
        included; or, when it decoded for at least as long as its first token took and for
        `DECODE_TOKENS` tokens (`show_pace`), its pace after the first token: a loaded machine's
        slow first token then does not make an unpaused engine's ordinary pace look like a
        backlog."""
        pace = before.tokens / max(before.at - self.started_at, MIN_INTERVAL_S)
        first = self.first
        if first is not None:
            latency_s = first.at - self.started_at
            decoding_s = before.at - first.at
            decoded = before.tokens - first.tokens
            if decoding_s >= latency_s and decoded >= DECODE_TOKENS:
                pace = max(pace, decoded / max(decoding_s, MIN_INTERVAL_S))
        burst = (end.tokens - since.tokens) / max(end.at - since.at, MIN_INTERVAL_S)
        return burst > BACKLOG_FACTOR * pace

    def show_pace(self, limit_s: float = DECODE_WAIT_S) -> None:
        """Let the stream decode after its first token for as long as that token took (at most
        `limit_s`, less when it ends), so that its own pace is known before a control step."""
        first = self.first
        if first is None:
            return
        latency_s = first.at - self.started_at
        left = min(latency_s, limit_s) - (time.monotonic() - first.at)
        if left > 0:
            self.thread.join(timeout=left)

    def finished(self) -> bool:
        return not self.thread.is_alive()

    def wait(self, seconds: float = STREAM_DEADLINE_S) -> bool:
        if self.thread.ident is None:  # never started: nothing to wait for
            return True
        self.thread.join(timeout=seconds)
        return self.finished()

    @property
    def exchange(self) -> Exchange:
        exchange = self.result.get("exchange")
        if exchange is None and self.failure is not None:
            raise self.failure
        if exchange is None:
            raise AssertionError("the in-flight stream never returned")
        return exchange

    def judge_terminal(self, verdict: Verdict) -> None:
        """Hold how the stream ended to the terminal-reason rules, whatever the control step it
        crossed did to it: a recognised finish reason true of its ids
        (`terminal.crossed_terminal_true`), and `cancelled` where an abort cut it short
        (`terminal.abort_reported`). A stream the deployment refused or never answered as a
        stream has no terminal to judge; a native SGLang stream reports its finish in its own
        schema (`meta_info.finish_reason`), held by the native route's rows."""
        if self.native or self.thread.ident is None:
            return
        self.wait()
        exchange = self.result.get("exchange")
        if exchange is None or exchange.fold is None or exchange.status != 200:
            return
        ending = terminal.ending_from_fold(exchange.fold)
        verdict.check(terminal.crossed_terminal_true(self.max_tokens, ending), exchange)
        verdict.check(terminal.abort_reported(self.max_tokens, ending), exchange)

    def completed(self) -> bool:
        """Ran to its length: every token it asked for arrived, or its choice ended with finish
        reason `length` (it asked for `max_tokens` with EOS ignored; an abort ends it early,
        `stop` or `cancelled`). How the stream itself was framed is judged elsewhere."""
        if not self.finished() or "exchange" not in self.result:
            return False
        fold = self.result["exchange"].fold
        finished_by_length = fold is not None and fold.finish_reasons.get("0") == "length"
        return finished_by_length or self.mark().tokens >= self.max_tokens


def first_token_s(
    verdict: Verdict,
    client: Client,
    target: Target,
    prompt: list[int],
    instance_id: int | None,
    max_tokens: int = 8,
) -> float:
    """An unpaused worker's time to the first token of a short stream, measured now: what a
    "held" verdict is sized from, so a slow engine cannot look held. A stream the deployment
    refuses fails `verdict` with its evidence; one that delivers nothing is `Unobservable`."""
    stream = InFlightStream(client, target, prompt, instance_id=instance_id, max_tokens=max_tokens)
    started = time.monotonic()
    stream.thread.start()
    stream.progress.wait_for_events(1, FIRST_TOKEN_S)
    elapsed = time.monotonic() - started
    stream.wait()
    if stream.progress.events == 0:
        verdict.folded(stream.exchange)
        raise Unobservable(
            f"the unpaused probe delivered nothing within {FIRST_TOKEN_S:g} s "
            f"({stream.exchange.state_reason or stream.exchange.error or 'no reason given'})"
        )
    return elapsed
