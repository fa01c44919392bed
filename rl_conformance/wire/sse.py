"""Incremental Server-Sent Events parser (WHATWG HTML, "Interpreting an event stream").

Bytes arrive in arbitrary pieces: an event, a line, a CRLF pair or a multi-byte UTF-8 character
may be split anywhere. The parser keeps the unfinished tail between `feed` calls and only
dispatches an event at a blank line, so what it yields never depends on how the transport
chunked the stream. It holds only the unfinished line and the current event's fields, so its
memory does not grow with the length of the stream, and each piece is split once (linear time
in the piece, however many lines it carries).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_LINE_BREAK = re.compile("\r\n|\r|\n")
"""The three line terminators of an event stream: CRLF, LF, CR."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event. `data` joins the event's `data:` lines with newlines."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecodeError(ValueError):
    """The stream is not valid UTF-8."""


class SSEParser:
    """Feed bytes, receive complete events.

    `close()` reports whether the stream ended in the middle of an event (`truncated`), which a
    conforming server never does: every event ends with a blank line.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._tail: list[str] = []
        """The unfinished line, in the pieces it arrived in."""
        self._pending_cr = False
        self._data: list[str] = []
        self._event_type = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._has_fields = False
        self.comments = 0
        self.truncated = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        try:
            text = self._decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            raise SSEDecodeError(f"event stream is not valid UTF-8: {exc}") from exc
        return self._consume(text)

    def close(self) -> list[SSEEvent]:
        """Signal end of stream. Returns nothing new: an unterminated event is discarded."""
        try:
            tail = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise SSEDecodeError(f"event stream ends inside a UTF-8 sequence: {exc}") from exc
        events = self._consume(tail)
        if any(self._tail) or self._has_fields:
            self.truncated = True
        self._tail = []
        self._data = []
        self._has_fields = False
        return events

    def _consume(self, text: str) -> list[SSEEvent]:
        if not text:
            return []
        if self._pending_cr:
            self._pending_cr = False
            if text.startswith("\n"):
                text = text[1:]
        if "\n" not in text and "\r" not in text:
            self._tail.append(text)  # the line goes on; joined once it ends
            return []
        self._tail.append(text)
        buffer = "".join(self._tail)
        # One split per chunk (never a slice per line, which is quadratic in the chunk size).
        if "\r" in buffer:
            lines = _LINE_BREAK.split(buffer)
            # A CR at the very end may be the first half of a CRLF split across chunks.
            self._pending_cr = buffer.endswith("\r")
        else:
            lines = buffer.split("\n")
        self._tail = [lines.pop()]
        events: list[SSEEvent] = []
        for line in lines:
            if line.startswith("data:"):
                self._data.append(line[6:] if line.startswith("data: ") else line[5:])
                self._has_fields = True
                continue
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        return events

    def _process_line(self, line: str) -> SSEEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        self._has_fields = True
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event_type = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> SSEEvent | None:
        data, event_type = self._data, self._event_type or "message"
        self._event_type = ""
        self._has_fields = False
        if not data:
            return None
        event = SSEEvent("\n".join(data), event_type, self._last_id, self._retry)
        data.clear()
        return event
