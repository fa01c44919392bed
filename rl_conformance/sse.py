"""Incremental Server-Sent Events parser (WHATWG HTML, "Interpreting an event stream").

Bytes arrive in arbitrary pieces: an event, a line, a CRLF pair or a multi-byte UTF-8 character
may be split anywhere. The parser keeps the unfinished tail between `feed` calls and only
dispatches an event at a blank line, so what it yields never depends on how the transport
chunked the stream.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(frozen=True)
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
        self._buffer = ""
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
        if self._buffer or self._has_fields:
            self.truncated = True
        self._buffer = ""
        self._data = []
        self._has_fields = False
        return events

    def _consume(self, text: str) -> list[SSEEvent]:
        if not text:
            return []
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = False
        self._buffer += text
        events: list[SSEEvent] = []
        while True:
            cut = _first_line_break(self._buffer)
            if cut is None:
                break
            end, width = cut
            line = self._buffer[:end]
            if width == 1 and self._buffer[end] == "\r" and end + 1 == len(self._buffer):
                self._pending_cr = True
            self._buffer = self._buffer[end + width :]
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
        has_data = bool(self._data)
        event = SSEEvent(
            data="\n".join(self._data),
            event=self._event_type or "message",
            id=self._last_id,
            retry=self._retry,
        )
        self._data = []
        self._event_type = ""
        self._has_fields = False
        return event if has_data else None


def _first_line_break(buffer: str) -> tuple[int, int] | None:
    """Position and width of the first CRLF, LF or CR; None if there is none yet."""
    lf = buffer.find("\n")
    cr = buffer.find("\r", 0, lf if lf >= 0 else len(buffer))
    if cr >= 0:
        return (cr, 2) if cr + 1 == lf else (cr, 1)
    if lf >= 0:
        return lf, 1
    return None
