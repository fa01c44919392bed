"""httpx's connection pool (httpcore) with every socket operation bounded by the deadline of the
request the calling thread is sending.

httpx's own timeouts bound each operation (connect, one read, one write) but not their sum: a
server dripping a byte just inside the read timeout would hold a request forever. Here each
operation waits at most what is left of the request's whole deadline (`deadline`, per thread:
a request is sent and read on the thread that called the client), so a stalled, dripping or
endless answer ends at the deadline with a timeout, with no event loop and no watchdog thread.
Name resolution is the exception: the system resolver answers by its own timeouts.
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
import typing
from collections.abc import Iterable, Iterator

import httpcore
import httpx

_current = threading.local()


@contextlib.contextmanager
def deadline(at: float) -> Iterator[None]:
    """Bound every socket operation of this thread's requests by `at` (`time.monotonic()`)."""
    outer = getattr(_current, "at", None)
    _current.at = at
    try:
        yield
    finally:
        _current.at = outer


def _bounded(timeout: float | None, expired: type[httpcore.TimeoutException]) -> float | None:
    """The wait an operation may take: what is left of the deadline, if less than `timeout`.
    Past the deadline the operation is not started: `expired` is raised (an endless stream
    whose every read returns at once is cut off here)."""
    at: float | None = getattr(_current, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise expired("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        wait = _bounded(timeout, httpcore.ConnectTimeout)
        inner = self._inner.start_tls(ssl_context, server_hostname, wait)
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        wait = _bounded(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, wait, local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        wait = _bounded(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_unix_socket(path, wait, socket_options)
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
)


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    """httpcore's exceptions as the httpx ones a caller of httpx expects."""
    try:
        yield
    except Exception as exc:
        for core, public in _ERRORS:
            if isinstance(exc, core):
                raise public(str(exc)) from exc
        raise


class _ResponseStream(httpx.SyncByteStream):
    def __init__(self, inner: Iterable[bytes]) -> None:
        self._inner = inner

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self._inner

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            with _as_httpx_errors():
                close()


class DeadlineTransport(httpx.BaseTransport):
    """HTTP/1.1 over httpcore's pool, each socket operation bounded by the thread's `deadline`."""

    def __init__(self, *, ssl_context: ssl.SSLContext, keepalive_expiry: float) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=None,
            keepalive_expiry=keepalive_expiry,
            network_backend=_DeadlineBackend(),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            answer = self._pool.handle_request(core)
        assert isinstance(answer.stream, Iterable)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_ResponseStream(answer.stream),
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self._pool.close()
