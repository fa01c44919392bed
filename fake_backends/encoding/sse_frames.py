"""Server-sent-event framing for the streaming routes.

Each event is ``data: <compact json>\n\n``; a stream normally ends with
``data: [DONE]\n\n``.  The content type is exactly ``text/event-stream`` (no charset
parameter), as the real frontend sends it.  The response that carries the frames (and
notices disconnects) is ``flow.LiveStreamResponse``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from typing import Any

from fake_backends.encoding.json_text import dumps

DONE_FRAME = b"data: [DONE]\n\n"
SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}


def frame(obj: Any) -> bytes:
    """One SSE event carrying a JSON payload."""
    return b"data: " + dumps(obj).encode("utf-8") + b"\n\n"


_PLACEHOLDER = "\x00text\x00"
_PLACEHOLDER_JSON = dumps(_PLACEHOLDER).encode("utf-8")
_json_string: Callable[[str], str] = json.encoder.encode_basestring  # what ``dumps`` writes


class TextFrames:
    """Frames of chunks that differ only in one text value, from a template per key: the
    chunk built once around a placeholder text, written, and split where the text goes.
    Each frame then costs one string encoding instead of a whole chunk's. Same bytes as
    ``frame(build(text))`` for a ``build`` that uses its text once, as a JSON string value."""

    def __init__(self) -> None:
        self._templates: dict[Hashable, tuple[bytes, bytes]] = {}

    def frame(self, key: Hashable, text: str, build: Callable[[str], Any]) -> bytes:
        template = self._templates.get(key)
        if template is None:
            head, found, tail = frame(build(_PLACEHOLDER)).partition(_PLACEHOLDER_JSON)
            if not found or _PLACEHOLDER_JSON in tail:
                raise ValueError("a text frame's chunk must carry its text exactly once")
            template = self._templates[key] = (head, tail)
        head, tail = template
        return head + _json_string(text).encode("utf-8") + tail
