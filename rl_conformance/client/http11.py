"""HTTP/1.1 on a socket for `http.Client`: the request's head, a connection's reads and writes,
the answer's head; every socket operation bounded by what is left of the request's deadline, so
a peer that stalls, drips or streams forever is cut off at the deadline with no event loop and
no watchdog thread (name resolution is the exception: the system resolver answers by its own
timeouts). Connections are opened by `dial` (directly or through a proxy, TLS where the URL
says https) and kept per origin by `pool.ConnectionPool`, which reads the bodies.

It does only what the suite needs: bodies framed by Content-Length, chunked or the connection's
close; interim 1xx answers skipped; an HTTP proxy; no redirects, cookies or HTTP/2. A
general-purpose stack (httpx over httpcore and h11) spent about 0.4 ms of CPU on each request,
more than a fake deployment spends answering it; the suite sends thousands.

A peer that breaks HTTP/1.1 gets a `WireError` naming what it broke. Failures are named
as httpx names them (`ConnectError`, `ReadTimeout`, `RemoteProtocolError`...): the reports
carry those names and `plugin.deaths` reads them.
"""

from __future__ import annotations

import contextlib
import functools
import re
import select
import socket
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol
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
NO_BODY_STATUSES = frozenset({204, 304})
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
    method: str,
    address: Address,
    headers: Sequence[tuple[str, str]],
    body: bytes | None,
    *,
    forwarded: Forwarding | None = None,
) -> bytes:
    """The request line and headers; `WireError` (LocalProtocolError) for a header that
    cannot be sent as it is. `forwarded`: an http URL sent to a proxy, in absolute form, with
    the proxy's credentials."""
    target = address.target
    if forwarded is not None:
        target = f"{address.scheme}://{address.authority}{target}"
    lines = [f"{method} {target} HTTP/1.1", f"Host: {address.authority}"]
    if forwarded is not None and forwarded.authorization is not None:
        lines.append(f"Proxy-Authorization: {forwarded.authorization}")
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


class Forwarding(Protocol):
    """A proxy an http request is sent to in absolute form (`network.Proxy`)."""

    @property
    def authorization(self) -> str | None: ...


def time_left(at: float, kind: str) -> float:
    """What is left until `at`; `WireTimeout` of `kind` once nothing is."""
    left = at - time.monotonic()
    if left <= 0:
        raise WireTimeout(kind, "the request's deadline has passed")
    return left


class Connection:
    """One socket and what was read from it beyond the last answer's end."""

    def __init__(
        self,
        sock: socket.socket,
        route: Hashable,
        *,
        explain: Callable[[OSError, float], str | None] = lambda exc, at: None,
    ) -> None:
        self.sock = sock
        self.route = route
        """Where it leads (the origin, and the proxy it goes through): what it may be reused for."""
        self.explain = explain
        """What a failed read or write means, where more can be said (a TLS alert's cause)."""
        self.buffer = bytearray()
        self.idle_since = 0.0
        self.aborted = False
        """The pool closed it under a request (`ConnectionPool.close`)."""

    def write(self, data: bytes, at: float) -> None:
        self.sock.settimeout(time_left(at, "WriteTimeout"))
        try:
            self.sock.sendall(data)
        except TimeoutError as exc:
            raise WireTimeout("WriteTimeout", "sending the request timed out") from exc
        except OSError as exc:
            raise WireError("WriteError", self._why(exc, at)) from exc

    def fill(self, at: float) -> bool:
        """Read what arrives into `buffer`; False at the peer's end of stream."""
        self.sock.settimeout(time_left(at, "ReadTimeout"))
        try:
            data = self.sock.recv(RECV_BYTES)
        except TimeoutError as exc:
            raise WireTimeout("ReadTimeout", "the answer stopped arriving") from exc
        except OSError as exc:
            raise WireError("ReadError", self._why(exc, at)) from exc
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

    def _why(self, exc: OSError, at: float) -> str:
        if self.aborted:
            return "the client was closed"
        return self.explain(exc, at) or str(exc) or type(exc).__name__


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


def joined_headers(headers: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Headers by lower-cased name, repeated ones joined by commas."""
    values: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        values[key] = f"{values[key]}, {value}" if key in values else value
    return values
