"""httpx and our wire, each as the other: an httpx transport as `http.Client`'s wire
(`Client(transport=...)`: tests give `httpx.MockTransport` to answer from a function; its
failures become the `http11` errors the client reports, under httpx's names), and our
connections as an httpx transport (`PoolTransport`: a launcher's readiness probes reach a
deployment through the run's certificates and proxies, as its tests do)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import httpx

from .http11 import WireError, WireTimeout
from .network import Network
from .pool import ConnectionPool

PROBE_KEEPALIVE_S = 2.0


def _translated(exc: httpx.HTTPError) -> WireError:
    kind = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return WireTimeout(kind, str(exc))
    return WireError(kind, str(exc))


class HttpxResponse:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers: Sequence[tuple[str, str]] = [
            (name.lower(), value) for name, value in response.headers.multi_items()
        ]

    def iter_raw(self) -> Iterator[bytes]:
        try:
            yield from self._response.iter_raw()
        except httpx.HTTPError as exc:
            raise _translated(exc) from exc

    def close(self) -> None:
        try:
            self._response.close()
        except httpx.HTTPError as exc:
            raise _translated(exc) from exc


class HttpxWire:
    def __init__(self, transport: httpx.BaseTransport) -> None:
        self._client = httpx.Client(transport=transport, follow_redirects=False, trust_env=False)

    def send(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        at: float,
    ) -> HttpxResponse:
        left = at - time.monotonic()
        if left <= 0:
            raise WireTimeout("ReadTimeout", "the request's deadline has passed")
        try:
            request = self._client.build_request(
                method, url, content=body, headers=list(headers), timeout=left
            )
            return HttpxResponse(self._client.send(request, stream=True))
        except httpx.HTTPError as exc:
            raise _translated(exc) from exc

    def close(self) -> None:
        self._client.close()


class PoolTransport(httpx.BaseTransport):
    """`pool.ConnectionPool` as an httpx transport: each request bounded by the longest of its
    httpx timeouts, its body read whole; our errors become httpx's."""

    def __init__(self, network: Network | None = None, default_timeout_s: float = 5.0) -> None:
        self._pool = ConnectionPool(network=network, keepalive_expiry=PROBE_KEEPALIVE_S)
        self._default_timeout_s = default_timeout_s

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = [t for t in (request.extensions.get("timeout") or {}).values() if t]
        at = time.monotonic() + max(timeouts, default=self._default_timeout_s)
        headers = [
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in request.headers.raw
        ]
        try:
            response = self._pool.send(
                request.method, str(request.url), headers, request.read() or None, at
            )
            try:
                body = b"".join(response.iter_raw())
            finally:
                response.close()
        except WireTimeout as exc:
            raise httpx.ReadTimeout(str(exc), request=request) from exc
        except WireError as exc:
            failure = httpx.ProxyError if exc.kind == "ProxyError" else httpx.ConnectError
            raise failure(str(exc), request=request) from exc
        return httpx.Response(
            response.status_code, headers=list(response.headers), content=body, request=request
        )

    def close(self) -> None:
        self._pool.close()
