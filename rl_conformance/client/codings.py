"""Content codings: the ones the client asks for, decoded as the body arrives under a cap on the
DECODED size.

A deployment behind an ingress may compress its JSON and its event streams; that is a legal
transport, so the client asks for the codings it can read (`ACCEPT_ENCODING`) and decodes them.
Every byte cap the client keeps applies to what the body decodes to: a small compressed body that
inflates without bound (a zip bomb) still stops at the cap, because a chunk is never inflated
beyond the room the cap leaves (`zlib`'s `max_length`), and what did not fit is never inflated.
A coding the client did not ask for is named, never read as the body.
"""

from __future__ import annotations

import zlib

ACCEPTED = ("gzip", "deflate")
ACCEPT_ENCODING = ", ".join(ACCEPTED)
"""The `Accept-Encoding` every request carries: without it httpx would ask for whatever
decoders happen to be installed, and an ingress could answer in a coding no check can read."""
_ALIASES = {"x-gzip": "gzip"}


class CodingError(ValueError):
    """A body the client cannot decode: a coding it did not ask for, or a corrupt coded body."""


class Decoder:
    """The decoded bytes of one body, chunk by chunk. `identity` passes bytes through."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._inflate: zlib._Decompress | None = None
        self._raw_fallback = coding == "deflate"
        if coding == "gzip":
            self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._inflate = zlib.decompressobj(zlib.MAX_WBITS)

    @property
    def identity(self) -> bool:
        return self._inflate is None

    def feed(self, chunk: bytes, room: int) -> bytes:
        """The decoded bytes of `chunk`, at most `room + 1` of them: more than `room` means the
        body decodes past its cap, and the rest of `chunk` is left uninflated."""
        if self._inflate is None:
            return chunk
        decoded = bytearray()
        data = chunk
        while data and len(decoded) <= room:
            try:
                decoded += self._inflate.decompress(data, room + 1 - len(decoded))
            except zlib.error as exc:
                if self._raw_fallback and not decoded:
                    # "deflate" is zlib-wrapped (RFC 9110 §8.4.1.2), yet some servers send the
                    # raw deflate stream: read that as the common clients do.
                    self._raw_fallback = False
                    self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise CodingError(f"the {self.coding} body does not decode: {exc}") from exc
            self._raw_fallback = False
            data = self._inflate.unconsumed_tail
            if self._inflate.eof and self._inflate.unused_data:
                data = self._inflate.unused_data  # the next gzip member
                self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return bytes(decoded)

    def finish(self) -> None:
        """Raise `CodingError` when the coded body ended before its coding did."""
        if self._inflate is not None and not self._inflate.eof:
            raise CodingError(f"the {self.coding} body ended before its end (truncated)")


def decoder_for(content_encoding: str | None) -> Decoder:
    """The decoder of a response's `Content-Encoding`; `CodingError` naming a coding the client
    did not ask for (or a stack of several, which no ingress sends for one answer)."""
    codings = [
        _ALIASES.get(name, name)
        for name in (part.strip().lower() for part in (content_encoding or "").split(","))
        if name and name != "identity"
    ]
    if not codings:
        return Decoder("identity")
    if len(codings) == 1 and codings[0] in ACCEPTED:
        return Decoder(codings[0])
    raise CodingError(
        f"content-encoding {content_encoding!r} is not one the client asked for "
        f"(Accept-Encoding: {ACCEPT_ENCODING}); the body was not read"
    )


class Encoder:
    """Re-encodes bytes in `coding` chunk by chunk, each chunk flushed so that an event stream
    reaches its reader event by event; `identity` passes bytes through."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._deflate: zlib._Compress | None = None
        if coding == "gzip":
            self._deflate = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._deflate = zlib.compressobj(wbits=zlib.MAX_WBITS)

    def feed(self, chunk: bytes) -> bytes:
        if self._deflate is None:
            return chunk
        return self._deflate.compress(chunk) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def finish(self) -> bytes:
        return b"" if self._deflate is None else self._deflate.flush()


__all__ = ["ACCEPTED", "ACCEPT_ENCODING", "CodingError", "Decoder", "Encoder", "decoder_for"]
