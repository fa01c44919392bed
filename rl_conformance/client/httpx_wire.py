"""An httpx transport as `http.Client`'s wire (`Client(transport=...)`): tests give
`httpx.MockTransport` to answer from a function. Its failures become the `http11` errors the
client reports, under httpx's names."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import httpx

from .http11 import WireError, WireTimeout


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
