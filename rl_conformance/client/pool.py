"""Connections kept per origin for `keepalive_expiry` (one request at a time on each), and the
answers read from them: bodies framed by Content-Length, chunked or the connection's close. The
connections are opened by `dial.dial`, as the pool's `network.Network` says."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .dial import dial
from .http11 import (
    NO_BODY_STATUSES,
    Address,
    Connection,
    Head,
    WireError,
    address_of,
    joined_headers,
    read_head,
    request_head,
)
from .network import Network, Proxy, direct


class Response:
    """An answer from a `ConnectionPool`; its body is read from the connection as it is
    iterated, and `close` gives the connection back for reuse when the body was read whole."""

    def __init__(
        self, pool: ConnectionPool, connection: Connection, method: str, head: Head, at: float
    ) -> None:
        self.status_code = head.status
        self.headers = head.headers
        self._pool = pool
        self._connection: Connection | None = connection
        self._at = at
        self._complete = False
        values = joined_headers(head.headers)
        connection_tokens = {
            token.strip().lower() for token in values.get("connection", "").split(",")
        }
        self._keep = "close" not in connection_tokens and (
            head.version == "1.1" or "keep-alive" in connection_tokens
        )
        self._length: int | None = None
        self._chunked = False
        if method == "HEAD" or head.status in NO_BODY_STATUSES or head.status < 200:
            self._length = 0
            self._keep = self._keep and head.status != 101
        elif "transfer-encoding" in values:
            codings = [c.strip().lower() for c in values["transfer-encoding"].split(",")]
            if [c for c in codings if c != "identity"] != ["chunked"]:
                raise WireError(
                    "RemoteProtocolError",
                    f"expected Transfer-Encoding: chunked (the one transfer coding this client "
                    f"reads; content codings go in Content-Encoding), observed "
                    f"{values['transfer-encoding']!r}",
                )
            self._chunked = True
        elif "content-length" in values:
            declared = {v.strip() for v in values["content-length"].split(",")}
            if len(declared) != 1 or not (length := declared.pop()).isdigit():
                raise WireError(
                    "RemoteProtocolError",
                    f"expected one decimal Content-Length, observed {values['content-length']!r}",
                )
            self._length = int(length)
        if self._length is None and not self._chunked:
            self._keep = False  # the body ends when the connection does

    def iter_raw(self) -> Iterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        if self._chunked:
            yield from self._chunks(connection)
        elif self._length is not None:
            yield from self._counted(connection, self._length)
        else:
            yield from self._until_close(connection)
        self._complete = True

    def _counted(self, connection: Connection, length: int) -> Iterator[bytes]:
        received = 0
        while received < length:
            if not connection.buffer and not connection.fill(self._at):
                raise WireError(
                    "RemoteProtocolError",
                    "peer closed connection without sending complete message body: "
                    f"received {received} bytes, expected {length}",
                )
            piece = bytes(connection.buffer[: length - received])
            del connection.buffer[: len(piece)]
            received += len(piece)
            yield piece

    def _chunks(self, connection: Connection) -> Iterator[bytes]:
        while True:
            line = connection.read_line(self._at, "a chunk-size line")
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                size = -1
            if size < 0 or not size_text:
                raise WireError(
                    "RemoteProtocolError", f"expected a hex chunk size, observed {line[:80]!r}"
                )
            if size == 0:
                while connection.read_line(self._at, "a trailer line"):
                    pass
                return
            while size:
                if not connection.buffer and not connection.fill(self._at):
                    raise WireError(
                        "RemoteProtocolError",
                        "peer closed connection without sending complete message body: "
                        "incomplete chunked read",
                    )
                piece = bytes(connection.buffer[:size])
                del connection.buffer[: len(piece)]
                size -= len(piece)
                yield piece
            if connection.read_line(self._at, "the end of a chunk"):
                raise WireError("RemoteProtocolError", "a chunk longer than its size")

    def _until_close(self, connection: Connection) -> Iterator[bytes]:
        while True:
            if connection.buffer:
                piece = bytes(connection.buffer)
                connection.buffer.clear()
                yield piece
            if not connection.fill(self._at):
                return

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._complete and self._keep and not connection.buffer:
            self._pool.release(connection)
        else:
            self._pool.discard(connection)


class ConnectionPool:
    """Keeps idle connections per origin; safe to share between threads (each request holds
    its connection alone until its response is closed)."""

    def __init__(self, *, network: Network | None = None, keepalive_expiry: float) -> None:
        self.network = network or direct()
        self._expiry = keepalive_expiry
        self._lock = threading.Lock()
        self._idle: dict[Hashable, list[Connection]] = {}
        self._busy: set[Connection] = set()
        self._closed = False

    def send(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        at: float,
    ) -> Response:
        address = address_of(url)
        proxy = self.network.proxy_for(address.scheme, address.host)
        forwarded = proxy if address.scheme == "http" else None
        head = request_head(method, address, headers, body, forwarded=forwarded)
        connection = self._checkout(address, proxy, at)
        try:
            connection.write(head + body if body else head, at)
            answer = read_head(connection, at)
            return Response(self, connection, method, answer, at)
        except BaseException:
            self.discard(connection)
            raise

    def release(self, connection: Connection) -> None:
        with self._lock:
            self._busy.discard(connection)
            if self._closed or connection.aborted:
                connection.close()
                return
            connection.idle_since = time.monotonic()
            self._idle.setdefault(connection.route, []).append(connection)

    def discard(self, connection: Connection) -> None:
        with self._lock:
            self._busy.discard(connection)
        connection.close()

    def close(self) -> None:
        """Close every connection: a request on another thread ends at once with a
        `WireError`, and later requests fail likewise."""
        with self._lock:
            self._closed = True
            idle = [c for connections in self._idle.values() for c in connections]
            self._idle.clear()
            busy = list(self._busy)
        for connection in idle:
            connection.close()
        for connection in busy:
            connection.aborted = True
            with contextlib.suppress(OSError):
                connection.sock.shutdown(socket.SHUT_RDWR)

    def _checkout(self, address: Address, proxy: Proxy | None, at: float) -> Connection:
        now = time.monotonic()
        stale: list[Connection] = []
        found: Connection | None = None
        with self._lock:
            if self._closed:
                raise WireError("ConnectError", "the client was closed")
            idle = self._idle.get((*address.origin, proxy))
            while idle:
                connection = idle.pop()
                if now - connection.idle_since < self._expiry:
                    found = connection
                    break
                stale.append(connection)
        for connection in stale:
            connection.close()
        if found is not None and found.idle_but_readable():
            found.close()
            found = None
        if found is None:
            found = dial(address, at, self.network, proxy)
        with self._lock:
            if self._closed:
                found.close()
                raise WireError("ConnectError", "the client was closed")
            self._busy.add(found)
        return found


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def fetch(
    method: str,
    url: str,
    *,
    json_body: Any = None,
    deadline_s: float,
    network: Network | None = None,
) -> Answer:
    """One request on a connection of its own, its answer read whole and uncapped: for the
    harness's calls to what it started itself (a fake deployment's control port), never for a
    deployment under test (`http.Client` is). `WireError` when no complete answer came."""
    body = None if json_body is None else json.dumps(json_body).encode()
    headers = [] if body is None else [("Content-Type", "application/json")]
    pool = ConnectionPool(network=network, keepalive_expiry=0)
    try:
        response = pool.send(method, url, headers, body, time.monotonic() + deadline_s)
        try:
            return Answer(response.status_code, b"".join(response.iter_raw()))
        finally:
            response.close()
    finally:
        pool.close()
