"""Server-sent-event framing for the streaming routes.

Each event is ``data: <compact json>\n\n``; a stream normally ends with
``data: [DONE]\n\n``.  The content type is exactly ``text/event-stream`` (no charset
parameter), as the real frontend sends it.  The response that carries the frames (and
notices disconnects) is ``flow.LiveStreamResponse``.
"""

from __future__ import annotations

from typing import Any

from fake_backends.encoding.json_text import dumps

DONE_FRAME = b"data: [DONE]\n\n"
SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}


def frame(obj: Any) -> bytes:
    """One SSE event carrying a JSON payload."""
    return b"data: " + dumps(obj).encode("utf-8") + b"\n\n"
