"""Server-sent-event framing for the streaming routes.

Each event is ``data: <compact json>\n\n``; a stream normally ends with
``data: [DONE]\n\n``.  The content type is exactly ``text/event-stream`` (no charset
parameter), as the real frontend sends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

from starlette.responses import StreamingResponse

from fake_backends.wire import dumps

DONE_FRAME = b"data: [DONE]\n\n"
SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}


def frame(obj: Any) -> bytes:
    """One SSE event carrying a JSON payload."""
    return b"data: " + dumps(obj).encode("utf-8") + b"\n\n"


async def _paced(frames: Iterable[bytes]) -> AsyncIterator[bytes]:
    # Yield to the loop between events so that chunks really leave one by one and
    # other requests (and, later, pause/abort controls) can run in between.
    for item in frames:
        yield item
        await asyncio.sleep(0)


def sse_response(frames: Iterable[bytes]) -> StreamingResponse:
    """Stream already-framed events; the iterable is consumed lazily."""
    return StreamingResponse(_paced(frames), headers=SSE_HEADERS)
