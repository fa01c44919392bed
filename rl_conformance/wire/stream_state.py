"""The terminal-state machine every streamed exchange is driven through.

The spec asks clients to "treat a streaming request as a state machine: accepted, streaming,
terminal success, canceled, or failed" and to "admit only a verified terminal result". This machine
is that acceptance logic: success is granted only at the end of the stream, and only if the stream
ended with `[DONE]`, carried no error frame, and terminated every choice it opened exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class StreamState(StrEnum):
    ACCEPTED = "accepted"
    STREAMING = "streaming"
    SUCCESS = "success"
    CANCELED = "canceled"
    FAILED = "failed"


TERMINAL_STATES = frozenset({StreamState.SUCCESS, StreamState.CANCELED, StreamState.FAILED})

DONE = "[DONE]"

# A terminal detector maps one parsed event payload to (choice key, is_terminal) pairs.
TerminalDetector = Callable[[Any], Iterable[tuple[str, bool]]]


def openai_terminals(payload: Any) -> Iterable[tuple[str, bool]]:
    """Choices of an OpenAI-style chunk; a choice is terminal when its finish_reason is set."""
    if not isinstance(payload, dict):
        return []
    choices = payload.get("choices")
    if not isinstance(choices, list):
        return []
    found = []
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict):
            continue
        key = str(choice.get("index", position))
        found.append((key, choice.get("finish_reason") is not None))
    return found


def sglang_terminals(payload: Any) -> Iterable[tuple[str, bool]]:
    """A native SGLang event is one sample, keyed by `index`; terminal once finish_reason is set."""
    if not isinstance(payload, dict):
        return []
    meta = payload.get("meta_info")
    finish = meta.get("finish_reason") if isinstance(meta, dict) else None
    return [(str(payload.get("index", 0)), finish is not None)]


@dataclass
class StreamMachine:
    detector: TerminalDetector = openai_terminals
    state: StreamState = StreamState.ACCEPTED
    reason: str = ""
    done_seen: bool = False
    opened: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    transitions: list[tuple[StreamState, str]] = field(default_factory=list)

    def _move(self, state: StreamState, reason: str) -> None:
        if self.state in TERMINAL_STATES:
            return
        self.state = state
        self.reason = reason
        self.transitions.append((state, reason))

    def _fail(self, reason: str) -> None:
        self._move(StreamState.FAILED, reason)

    def on_payload(self, payload: Any) -> None:
        """One data event, already parsed (the string `[DONE]` for the terminator)."""
        if self.state in TERMINAL_STATES:
            return
        if self.state is StreamState.ACCEPTED:
            self._move(StreamState.STREAMING, "first event received")
        if self.done_seen:
            self._fail("data received after [DONE]")
            return
        if payload == DONE:
            self.done_seen = True
            return
        if isinstance(payload, dict) and "error" in payload and "choices" not in payload:
            self._fail(f"error frame in stream: {_short(payload['error'])}")
            return
        for key, terminal in self.detector(payload):
            if key in self.finished:
                kind = "a second terminal event" if terminal else "content after its terminal event"
                self._fail(f"choice {key} received {kind}")
                return
            self.opened.add(key)
            if terminal:
                self.finished.add(key)

    def on_unparseable(self, detail: str) -> None:
        self._fail(f"unparseable event: {detail}")

    def on_transport_error(self, detail: str) -> None:
        self._fail(detail)

    def on_cancel(self) -> None:
        self._move(StreamState.CANCELED, "canceled by the client before the stream ended")

    def on_end(self) -> None:
        """The server closed the stream; decide the terminal state."""
        if self.state in TERMINAL_STATES:
            return
        if not self.done_seen:
            self._fail("stream ended without data: [DONE]")
            return
        if not self.opened:
            self._fail("stream carried no choice")
            return
        unfinished = sorted(self.opened - self.finished)
        if unfinished:
            self._fail(f"choice(s) {', '.join(unfinished)} ended without a finish_reason")
            return
        self._move(StreamState.SUCCESS, "every choice terminated once, then [DONE]")


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
