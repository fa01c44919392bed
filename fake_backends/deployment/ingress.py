"""An ingress in front of the frontend that compresses what it forwards, as nginx's ``gzip on``
does: JSON and event streams in the coding the client accepts (``Accept-Encoding``), each stream
chunk flushed as it passes so events still arrive one by one. A legal transport: a client that
asked for the coding must read it.
"""

from __future__ import annotations

import zlib
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

INGRESS_CODINGS = ("identity", "gzip", "deflate")
COMPRESSED_TYPES = ("application/json", "text/event-stream")
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def accepts(header: str, coding: str) -> bool:
    """Whether an ``Accept-Encoding`` value accepts ``coding`` (explicitly, or by ``*``)."""
    for part in header.split(","):
        name, _, params = part.strip().partition(";")
        if name.strip().lower() in (coding, "*"):
            return params.replace(" ", "").lower() not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


class CompressingIngress:
    """Wraps an ASGI app; ``coding`` is ``gzip`` or ``deflate``."""

    def __init__(self, app: ASGIApp, coding: str) -> None:
        if coding not in _WBITS:
            raise ValueError(f"unknown ingress coding {coding!r}; choose one of: gzip, deflate")
        self.app = app
        self.coding = coding

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        accepted = dict(scope["headers"]).get(b"accept-encoding", b"").decode("latin-1")
        if not accepts(accepted, self.coding):
            await self.app(scope, receive, send)
            return
        packer: Any = None

        async def compressing(message: Message) -> None:
            nonlocal packer
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                kind = dict(headers).get(b"content-type", b"").decode("latin-1")
                if b"content-encoding" not in names and kind.startswith(COMPRESSED_TYPES):
                    packer = zlib.compressobj(wbits=_WBITS[self.coding])
                    headers = [(n, v) for n, v in headers if n.lower() != b"content-length"]
                    headers += [
                        (b"content-encoding", self.coding.encode()),
                        (b"vary", b"accept-encoding"),
                    ]
                    message = {**message, "headers": headers}
            elif message["type"] == "http.response.body" and packer is not None:
                more = message.get("more_body", False)
                body = packer.compress(message.get("body", b""))
                body += packer.flush(zlib.Z_SYNC_FLUSH if more else zlib.Z_FINISH)
                message = {**message, "body": body}
            await send(message)

        await self.app(scope, receive, compressing)
