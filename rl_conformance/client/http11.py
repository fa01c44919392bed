"""HTTP/1.1 over sockets (TLS where the URL says https) for `http.Client`: one request at a time
per connection, idle connections kept per origin for `keepalive_expiry`, and every socket
operation bounded by what is left of the request's deadline, so a peer that stalls, drips or
streams forever is cut off at the deadline with no event loop and no watchdog thread (name
resolution is the exception: the system resolver answers by its own timeouts).

It does only what the suite needs: bodies framed by Content-Length, chunked or the connection's
close; interim 1xx answers skipped; no redirects, proxies, cookies or HTTP/2. A general-purpose
stack (httpx over httpcore and h11) spent about 0.4 ms of CPU on each request, more than a fake
deployment spends answering it; the suite sends thousands.

A peer that breaks HTTP/1.1 gets a `WireError` naming what it broke. Failures are named
as httpx names them (`ConnectError`, `ReadTimeout`, `RemoteProtocolError`...): the reports
carry those names and `plugin.deaths` reads them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

from .. import errors
from ..version import __version__

MAX_HEAD_BYTES = 64 * 1024
"""A response head (status line and headers) longer than this is refused."""
MAX_LINE_BYTES = 4096
"""A chunk-size or trailer line longer than this is refused."""
RECV_BYTES = 64 * 1024
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([^\r\n]*))?")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_UNSAFE_VALUE = re.compile(r"[\r\n\x00]")
_KEPT_IN_TARGET = "/?:@!$&'()*+,;=%-._~"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_NO_BODY_STATUSES = frozenset({204, 304})
DEFAULT_HEADERS = (
    ("Accept", "*/*"),
    ("Connection", "keep-alive"),
    ("User-Agent", f"dynamo-rl-conformance/{__version__}"),
)
"""Sent unless the request names its own (the `Host` header is always the URL's)."""


class WireError(errors.TransportError):
    """The request got no complete answer; `kind` names how, `str()` says what was seen."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class WireTimeout(WireError, errors.DeadlineExceeded):
    """What was left of the request's deadline ran out during a socket operation."""


class WireResponse(Protocol):
    """An answer whose head has arrived; its body is read with `iter_raw` (transfer coding
    removed, content coding kept) and `close` always follows."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Sequence[tuple[str, str]]: ...

    def iter_raw(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class Wire(Protocol):
    """What sends a request for `http.Client`: `ConnectionPool`, or an httpx transport
    (`httpx_wire.HttpxWire`)."""

    def send(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        at: float,
    ) -> WireResponse: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Address:
    """Where a URL's request goes and what its request line and Host header say."""

    scheme: str
    host: str
    port: int
    authority: str
    target: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port


@functools.lru_cache(maxsize=1024)
def address_of(url: str) -> Address:
    """The address of an absolute http(s) URL; `WireError` (UnsupportedProtocol) names
    what is wrong with any other."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WireError("UnsupportedProtocol", f"not a usable URL {url!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise WireError(
            "UnsupportedProtocol",
            f"expected an http:// or https:// URL, observed {url!r}",
        )
    if not parts.hostname:
        raise WireError("UnsupportedProtocol", f"the URL {url!r} names no host")
    target = quote(parts.path or "/", safe=_KEPT_IN_TARGET)
    if parts.query:
        target += "?" + quote(parts.query, safe=_KEPT_IN_TARGET)
    return Address(
        scheme=scheme,
        host=parts.hostname,
        port=port if port is not None else (443 if scheme == "https" else 80),
        authority=parts.netloc.rpartition("@")[2],
        target=target,
    )


def request_head(
    method: str, address: Address, headers: Sequence[tuple[str, str]], body: bytes | None
) -> bytes:
    """The request line and headers; `WireError` (LocalProtocolError) for a header that
    cannot be sent as it is."""
    lines = [f"{method} {address.target} HTTP/1.1", f"Host: {address.authority}"]
    given = {name.lower() for name, _ in headers}
    lines += [f"{name}: {value}" for name, value in DEFAULT_HEADERS if name.lower() not in given]
    for name, value in headers:
        if name.lower() == "host":
            continue
        if not _TOKEN.fullmatch(name) or _UNSAFE_VALUE.search(value):
            raise WireError("LocalProtocolError", f"the header {name!r}: {value!r} cannot be sent")
        lines.append(f"{name}: {value}")
    if "content-length" not in given:
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        elif method in _BODY_METHODS:
            lines.append("Content-Length: 0")
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError as exc:
        raise WireError(
            "LocalProtocolError",
            f"a header is not Latin-1 text: {exc.object[exc.start : exc.end]!r}",
        ) from exc


def _left(at: float, kind: str) -> float:
    left = at - time.monotonic()
    if left <= 0:
        raise WireTimeout(kind, "the request's deadline has passed")
    return left


class Connection:
    """One socket and what was read from it beyond the last answer's end."""

    def __init__(self, sock: socket.socket, origin: tuple[str, str, int]) -> None:
        self.sock = sock
        self.origin = origin
        self.buffer = bytearray()
        self.idle_since = 0.0
        self.aborted = False
        """The pool closed it under a request (`ConnectionPool.close`)."""

    def write(self, data: bytes, at: float) -> None:
        self.sock.settimeout(_left(at, "WriteTimeout"))
        try:
            self.sock.sendall(data)
        except TimeoutError as exc:
            raise WireTimeout("WriteTimeout", "sending the request timed out") from exc
        except OSError as exc:
            raise WireError("WriteError", self._why(exc)) from exc

    def fill(self, at: float) -> bool:
        """Read what arrives into `buffer`; False at the peer's end of stream."""
        self.sock.settimeout(_left(at, "ReadTimeout"))
        try:
            data = self.sock.recv(RECV_BYTES)
        except TimeoutError as exc:
            raise WireTimeout("ReadTimeout", "the answer stopped arriving") from exc
        except OSError as exc:
            raise WireError("ReadError", self._why(exc)) from exc
        if not data:
            if self.aborted:
                raise WireError("ReadError", "the client was closed")
            return False
        self.buffer += data
        return True

    def read_line(self, at: float, what: str) -> bytes:
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[:end]).rstrip(b"\r")
                del self.buffer[: end + 1]
                return line
            if len(self.buffer) > MAX_LINE_BYTES:
                raise WireError("RemoteProtocolError", f"{what} longer than {MAX_LINE_BYTES} bytes")
            if not self.fill(at):
                raise WireError(
                    "RemoteProtocolError",
                    f"peer closed connection without sending complete message body: {what} cut",
                )

    def idle_but_readable(self) -> bool:
        """An idle connection with something to read was closed by its peer (or is out of
        step with it): not to be reused."""
        try:
            if hasattr(select, "poll"):  # no limit on descriptor numbers, unlike select()
                poller = select.poll()
                poller.register(self.sock, select.POLLIN)
                return bool(poller.poll(0))
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def _why(self, exc: OSError) -> str:
        return "the client was closed" if self.aborted else str(exc) or type(exc).__name__


@dataclass(frozen=True, slots=True)
class Head:
    version: str
    status: int
    headers: list[tuple[str, str]]


def parse_head(raw: bytes) -> Head:
    lines = raw.split(b"\n")
    status_line = lines[0].rstrip(b"\r")
    matched = _STATUS_LINE.fullmatch(status_line)
    if matched is None:
        raise WireError(
            "RemoteProtocolError",
            f"expected an HTTP/1.x status line, observed {status_line[:80]!r}",
        )
    headers: list[tuple[str, str]] = []
    for raw_line in lines[1:]:
        line = raw_line.rstrip(b"\r")
        name, colon, value = line.partition(b":")
        text = name.decode("latin-1")
        if not colon or not _TOKEN.fullmatch(text):
            raise WireError(
                "RemoteProtocolError",
                f"expected a header line 'name: value', observed {line[:80]!r}",
            )
        headers.append((text.lower(), _header_text(value.strip(b" \t"))))
    return Head(f"1.{matched.group(1).decode()}", int(matched.group(2)), headers)


def _header_text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def read_head(connection: Connection, at: float) -> Head:
    """The next final answer's head (interim 1xx answers are read and dropped)."""
    while True:
        searched = 0
        while (found := _HEAD_END.search(connection.buffer, searched)) is None:
            if len(connection.buffer) > MAX_HEAD_BYTES:
                raise WireError(
                    "RemoteProtocolError", f"response head longer than {MAX_HEAD_BYTES} bytes"
                )
            searched = max(0, len(connection.buffer) - 3)
            if not connection.fill(at):
                raise WireError(
                    "RemoteProtocolError",
                    "Server disconnected without sending a response."
                    if not connection.buffer
                    else "Server disconnected in the middle of the response head.",
                )
        raw = bytes(connection.buffer[: found.start()])
        del connection.buffer[: found.end()]
        head = parse_head(raw)
        if not 100 <= head.status < 200 or head.status == 101:
            return head


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
        if method == "HEAD" or head.status in _NO_BODY_STATUSES or head.status < 200:
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


def joined_headers(headers: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Headers by lower-cased name, repeated ones joined by commas."""
    values: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        values[key] = f"{values[key]}, {value}" if key in values else value
    return values


class ConnectionPool:
    """Keeps idle connections per origin; safe to share between threads (each request holds
    its connection alone until its response is closed)."""

    def __init__(self, *, tls: Callable[[], ssl.SSLContext], keepalive_expiry: float) -> None:
        self._tls = tls
        self._expiry = keepalive_expiry
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
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
        head = request_head(method, address, headers, body)
        connection = self._checkout(address, at)
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
            self._idle.setdefault(connection.origin, []).append(connection)

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

    def _checkout(self, address: Address, at: float) -> Connection:
        now = time.monotonic()
        stale: list[Connection] = []
        found: Connection | None = None
        with self._lock:
            if self._closed:
                raise WireError("ConnectError", "the client was closed")
            idle = self._idle.get(address.origin)
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
            found = self._connect(address, at)
        with self._lock:
            if self._closed:
                found.close()
                raise WireError("ConnectError", "the client was closed")
            self._busy.add(found)
        return found

    def _connect(self, address: Address, at: float) -> Connection:
        try:
            sock = socket.create_connection(
                (address.host, address.port), timeout=_left(at, "ConnectTimeout")
            )
        except TimeoutError as exc:
            raise WireTimeout("ConnectTimeout", "connecting timed out") from exc
        except OSError as exc:
            raise WireError("ConnectError", str(exc) or type(exc).__name__) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if address.scheme == "https":
                sock.settimeout(_left(at, "ConnectTimeout"))
                sock = self._tls().wrap_socket(sock, server_hostname=address.host)
        except TimeoutError as exc:
            sock.close()
            raise WireTimeout("ConnectTimeout", "the TLS handshake timed out") from exc
        except OSError as exc:
            sock.close()
            raise WireError("ConnectError", str(exc) or type(exc).__name__) from exc
        except BaseException:
            sock.close()
            raise
        return Connection(sock, address.origin)


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
    tls: Callable[[], ssl.SSLContext] = ssl.create_default_context,
) -> Answer:
    """One request on a connection of its own, its answer read whole and uncapped: for the
    harness's calls to what it started itself (a fake deployment's control port), never for a
    deployment under test (`http.Client` is). `WireError` when no complete answer came."""
    body = None if json_body is None else json.dumps(json_body).encode()
    headers = [] if body is None else [("Content-Type", "application/json")]
    pool = ConnectionPool(tls=tls, keepalive_expiry=0)
    try:
        response = pool.send(method, url, headers, body, time.monotonic() + deadline_s)
        try:
            return Answer(response.status_code, b"".join(response.iter_raw()))
        finally:
            response.close()
    finally:
        pool.close()
