"""The only code that speaks HTTP to a deployment.

Every request has a deadline covering connect, headers and the whole body; a server that stalls,
drips bytes or streams forever is cut off at the deadline and the exchange is returned with
`error` set, never raised past the caller and never left hanging. Bodies are capped in size
(a declared Content-Length over the cap is refused before reading), streams in bytes and in
events; each cut names the limit it hit. A body or stream in a content coding the client asks
for (`codings.ACCEPT_ENCODING`) is decoded as it arrives, and every cap counts decoded bytes.
Streams are parsed incrementally, driven through `StreamMachine` and folded
(`checks.stream_fold.StreamFold`) event by event; the exchange keeps at most `keep_events` of
them (the first and last halves of a longer stream), so a stream's length costs memory only in
its folded token ids and logprobs. A `CircuitBreaker` counts transport failures per plane: once
a plane stopped answering, requests to it raise `PlaneUnavailable` at once instead of waiting out
a deadline.

Requests are sent and read on the calling thread, so several threads may share one client
(a control step taken while a stream runs); every socket operation waits at most what is left of
its request's deadline (`http11`, the HTTP/1.1 connections), which makes the deadline hold without
an event loop.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..checks.stream_fold import StreamFold
from ..model.credentials import Credentials
from ..wire.exchange import KEPT_EVENTS, STREAM_BODY_HEAD, Exchange, WireRequest, parse_json
from ..wire.sse import SSEDecodeError, SSEEvent, SSEParser
from ..wire.stream_state import (
    DONE,
    StreamMachine,
    StreamState,
    TerminalDetector,
    openai_terminals,
)
from .breaker import CircuitBreaker
from .codings import ACCEPT_ENCODING, CodingError, Decoder, decoder_for
from .http11 import (
    Wire,
    WireError,
    WireResponse,
    WireTimeout,
    joined_headers,
)
from .identity import AttemptIdentity
from .network import Network
from .pool import ConnectionPool
from .progress import StreamProgress
from .refusals import REFUSALS, refusal

if TYPE_CHECKING:
    import httpx

DEFAULT_DEADLINE_S = 30.0
DISCOVERY_DEADLINE_FACTOR = 1.5
"""A read of `/v1/rl/workers` waits this many times the request deadline: at the default (30 s,
the RL listener's own default probe deadline, `DYN_RL_REQUEST_TIMEOUT_SECS`) that is 45 s, so a
worker that never answers its probe is listed with its `error` by the listener before the
client gives up on the whole read; a shorter `--deadline` shortens it too."""


def discovery_deadline_s(deadline_s: float) -> float:
    return deadline_s * DISCOVERY_DEADLINE_FACTOR


DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_STREAM_EVENTS = 1_000_000
DEFAULT_MAX_STREAM_BYTES = 512 * 1024 * 1024
"""A stream is not held in memory (see `keep_events`): its caps bound time, not memory."""
LOG_LENGTH = 64
"""Exchanges a tape keeps (the most recent): a test's reproducer; evidence keeps its own."""


KEEPALIVE_EXPIRY_S = 2.0
"""An idle connection is not reused after this long. Servers commonly close idle connections
after 5 s (uvicorn's default, and httpx's own expiry): a request sent on one at that moment is
reset before any answer and would read as the deployment's transport failure."""


class Client:
    """HTTP client producing `Exchange` records; safe to share between threads. It speaks
    through its own HTTP/1.1 connections (`pool.ConnectionPool`), opened as `network` says
    (certificates, proxies; default: directly, trusting certifi's CAs), or through `transport`,
    an httpx transport (tests answer from a function with `httpx.MockTransport`)."""

    def __init__(
        self,
        *,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_stream_events: int = DEFAULT_MAX_STREAM_EVENTS,
        transport: httpx.BaseTransport | None = None,
        breaker: CircuitBreaker | None = None,
        max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES,
        keep_events: int = KEPT_EVENTS,
        credentials: Credentials | None = None,
        network: Network | None = None,
    ) -> None:
        self.deadline_s = deadline_s
        self.credentials = credentials
        """Each request carries its plane's (`model.credentials`); what it records shows their
        references, never their values. A 401 or 403 raises `refusals.CredentialsRefused`."""
        self.max_body_bytes = max_body_bytes
        self.max_stream_events = max_stream_events
        self.max_stream_bytes = max_stream_bytes
        self.keep_events = max(keep_events, 2)
        self.breaker = breaker if breaker is not None else CircuitBreaker()
        self.network = network or Network()
        """How this client reaches deployments (certificates, proxies)."""
        self._wire: Wire
        if transport is not None:
            from .httpx_wire import HttpxWire  # httpx only where a transport is given

            self._wire = HttpxWire(transport)
        else:
            self._wire = ConnectionPool(network=self.network, keepalive_expiry=KEEPALIVE_EXPIRY_S)
        self.log: deque[Exchange] = deque(maxlen=LOG_LENGTH)
        """The tape now recording: every exchange sent since the last `new_tape` (or since the
        client was made), the last `LOG_LENGTH` of them."""
        self.identity = AttemptIdentity()
        """Stamped on every generation request (`identity.AttemptIdentity`)."""

    def new_tape(self) -> deque[Exchange]:
        """Record the exchanges from now on on a tape of their own, and return it: one test's
        requests, handed to its record as they are (a reproducer of the whole sequence)."""
        self.log = deque(maxlen=LOG_LENGTH)
        return self.log

    def close(self) -> None:
        """Close every connection; a request still running on another thread ends with a
        transport error at once (or at its deadline), never waits past it."""
        self._wire.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def get(self, url: str, **kwargs: Any) -> Exchange:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, json_body: Any = None, **kwargs: Any) -> Exchange:
        return self.request("POST", url, json_body=json_body, **kwargs)

    def request(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        deadline_s: float | None = None,
    ) -> Exchange:
        self.breaker.check(url)
        exchange, target, sent = self._prepare(method, url, json_body, content, headers)
        limit = deadline_s or self.deadline_s
        started = time.monotonic()
        try:
            response = self._wire.send(method, target, sent, exchange.request.body, started + limit)
            try:
                exchange.first_byte_s = time.monotonic() - started
                self._record_head(exchange, response)
                self._read_body(exchange, response)
            finally:
                response.close()
        except WireTimeout:
            exchange.error = f"no complete response within the {limit:g} s deadline"
        except WireError as exc:
            exchange.error = _transport_message(exc)
        exchange.elapsed_s = time.monotonic() - started
        self._account(exchange, deadline_s)
        return exchange

    def _refuse(self, exchange: Exchange) -> None:
        """Raise `CredentialsRefused` for a 401 or 403, and refuse the plane from now on."""
        if exchange.status not in REFUSALS:
            return
        refused = refusal(exchange, self.credentials or Credentials())
        if refused is not None:
            self.breaker.refuse(exchange.request.url, str(refused), error=refused)
            raise refused

    def stream(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        detector: TerminalDetector = openai_terminals,
        cancel_after_events: int | None = None,
        deadline_s: float | None = None,
        progress: StreamProgress | None = None,
    ) -> Exchange:
        """Send a streaming request and drive its events through the terminal-state machine.

        `cancel_after_events` closes the connection after that many data events, as a client
        that gives up on a rollout would; the exchange then ends `canceled`. `progress` is told
        each event as it arrives (another thread may read it while the stream runs).
        """
        self.breaker.check(url)
        exchange, target, sent = self._prepare(method, url, json_body, None, headers)
        machine = StreamMachine(detector=detector)
        parser = SSEParser()
        limit = deadline_s or self.deadline_s
        started = time.monotonic()
        try:
            response = self._wire.send(method, target, sent, exchange.request.body, started + limit)
            try:
                exchange.first_byte_s = time.monotonic() - started
                self._record_head(exchange, response)
                if response.status_code != 200 or "text/event-stream" not in exchange.content_type:
                    self._read_body(exchange, response)
                    machine.on_transport_error(_not_a_stream(exchange))
                else:
                    self._pump(exchange, response, parser, machine, cancel_after_events, progress)
            finally:
                response.close()
        except WireTimeout:
            exchange.error = f"stream not finished within the {limit:g} s deadline"
            machine.on_transport_error(exchange.error)
        except WireError as exc:
            exchange.error = _transport_message(exc)
            machine.on_transport_error(exchange.error)
        exchange.elapsed_s = time.monotonic() - started
        exchange.state = machine.state
        exchange.state_reason = machine.reason
        if progress is not None:
            progress.end()
        self._account(exchange, deadline_s)
        return exchange

    def _account(self, exchange: Exchange, deadline_s: float | None) -> None:
        """Tell the breaker; a deadline the caller shortened on purpose is not the plane's. A
        plane that refused the run's credentials is refused from now on (`_refuse`)."""
        self.breaker.record(exchange, counts=deadline_s is None or deadline_s >= self.deadline_s)
        self._refuse(exchange)

    def _pump(
        self,
        exchange: Exchange,
        response: WireResponse,
        parser: SSEParser,
        machine: StreamMachine,
        cancel_after_events: int | None,
        progress: StreamProgress | None = None,
    ) -> None:
        kept = _KeptEvents(exchange, self.keep_events)
        fold = exchange.fold = StreamFold()
        head = bytearray()
        received = 0
        try:
            decoder = _decoder(exchange)
            if decoder is None:
                machine.on_transport_error(str(exchange.error))
                return
            for raw in response.iter_raw():
                try:
                    chunk = decoder.feed(raw, self.max_stream_bytes - received)
                except CodingError as exc:
                    exchange.error = f"undecodable stream: {exc}"
                    machine.on_transport_error(exchange.error)
                    return
                if received + len(chunk) > self.max_stream_bytes:
                    exchange.body_truncated = True
                    exchange.error = (
                        f"stream exceeded the {self.max_stream_bytes}-byte limit"
                        f"{_decoded(decoder)}; connection closed"
                    )
                    machine.on_transport_error(exchange.error)
                    return
                received += len(chunk)
                if len(head) < STREAM_BODY_HEAD:
                    head += chunk[: STREAM_BODY_HEAD - len(head)]
                try:
                    events = parser.feed(chunk)
                except SSEDecodeError as exc:
                    exchange.error = f"undecodable stream: {exc}"
                    machine.on_unparseable(str(exc))
                    return
                for event in events:
                    if kept.count >= self.max_stream_events:
                        exchange.error = (
                            f"stream exceeded the {self.max_stream_events}-event limit; "
                            "connection closed"
                        )
                        machine.on_transport_error(exchange.error)
                        return
                    self._feed_machine(machine, fold, event.data, kept.count)
                    kept.add(event)
                    if progress is not None:
                        progress.advance(
                            kept.count, len(fold.ids), event.data if kept.count == 1 else None
                        )
                    if cancel_after_events is not None and kept.count >= cancel_after_events:
                        machine.on_cancel()
                        return
            try:
                for event in parser.close():
                    kept.add(event)
            except SSEDecodeError as exc:
                machine.on_unparseable(str(exc))
                return
            if parser.truncated:
                machine.on_transport_error("stream ended in the middle of an event")
                return
            machine.on_end()
        finally:
            exchange.body = bytes(head)
            exchange.stream_bytes = received
            kept.close()

    @staticmethod
    def _feed_machine(machine: StreamMachine, fold: StreamFold, data: str, position: int) -> None:
        if data == DONE:
            machine.on_payload(DONE)
            fold.add(position, DONE)
            return
        try:
            payload = json.loads(data)  # as `parse_json` reads it; its error only when it fails
        except ValueError:
            try:
                payload = parse_json(data.encode(), what=f"event {position}")
            except ValueError as exc:
                machine.on_unparseable(str(exc))
                fold.add_unparseable(position, str(exc))
                return
        machine.on_payload(payload)
        fold.add(position, payload)

    def _prepare(
        self,
        method: str,
        url: str,
        json_body: Any,
        content: bytes | None,
        headers: dict[str, str] | None,
    ) -> tuple[Exchange, str, Sequence[tuple[str, str]]]:
        """The exchange recording the request, the URL to send it to and the headers to send
        (the request's, its plane's credentials in place of any of the same name, and the
        `Accept-Encoding` the client decodes unless the request names its own). The exchange
        records the credentials by reference (`Sent.shown`)."""
        all_headers = dict(headers or {})
        self.identity.stamp(method, url, all_headers)
        body = content
        if json_body is not None:
            body = json.dumps(json_body, separators=(",", ":")).encode()
            all_headers.setdefault("Content-Type", "application/json")
        target, recorded_url = url, url
        recorded = all_headers
        sent = list(all_headers.items())
        if self.credentials is not None:
            applied = self.credentials.apply(url)
            target, recorded_url = applied.url, applied.recorded_url
            if applied.headers:
                replaced = {credential.name.lower() for credential in applied.headers}
                kept = {k: v for k, v in all_headers.items() if k.lower() not in replaced}
                sent = [*kept.items(), *((c.name, c.current()) for c in applied.headers)]
                recorded = {**kept, **{c.name: c.shown for c in applied.headers}}
        if not any(name.lower() == "accept-encoding" for name in all_headers):
            sent.insert(0, ("Accept-Encoding", ACCEPT_ENCODING))
        wire = WireRequest(
            method=method,
            url=recorded_url,
            headers=recorded,
            body=body,
            curl_options=self.network.curl_options(url),
        )
        exchange = Exchange(request=wire)
        self.log.append(exchange)
        return exchange, target, sent

    @staticmethod
    def _record_head(exchange: Exchange, response: WireResponse) -> None:
        exchange.status = response.status_code
        exchange.headers = joined_headers(response.headers)

    def _read_body(self, exchange: Exchange, response: WireResponse) -> None:
        decoder = _decoder(exchange)
        if decoder is None:
            return
        declared = exchange.headers.get("content-length", "")
        if decoder.identity and declared.isdigit() and int(declared) > self.max_body_bytes:
            exchange.body_truncated = True
            exchange.error = (
                f"response body of {declared} bytes exceeds the {self.max_body_bytes}-byte "
                "limit; not read"
            )
            return
        body = bytearray()
        try:
            for raw in response.iter_raw():
                body += decoder.feed(raw, self.max_body_bytes - len(body))
                if len(body) > self.max_body_bytes:
                    exchange.body = bytes(body[: self.max_body_bytes])
                    exchange.body_truncated = True
                    exchange.error = (
                        f"response body exceeded the {self.max_body_bytes}-byte limit"
                        f"{_decoded(decoder)}"
                    )
                    return
            decoder.finish()
        except CodingError as exc:
            exchange.error = f"undecodable response body: {exc}"
        exchange.body = bytes(body)


class _KeptEvents:
    """The events an exchange keeps: all of them up to `keep`, then the first half of `keep`
    and a window of the last ones."""

    def __init__(self, exchange: Exchange, keep: int) -> None:
        self.exchange = exchange
        self.keep = keep
        self.count = 0
        self.tail: deque[SSEEvent] | None = None

    def add(self, event: SSEEvent) -> None:
        self.count += 1
        events = self.exchange.events
        if self.tail is None:
            events.append(event)
            if len(events) <= self.keep:
                return
            half = self.keep // 2
            self.tail = deque(events[half:], maxlen=self.keep - half)
            del events[half:]
            self.exchange.elided_at = half
        else:
            self.tail.append(event)
        self.exchange.events_elided = self.count - self.keep

    def close(self) -> None:
        if self.tail is not None:
            self.exchange.events.extend(self.tail)
            self.tail = None


def _transport_message(exc: WireError) -> str:
    return f"transport error ({exc.kind}): {exc or 'no detail'}"


def _decoder(exchange: Exchange) -> Decoder | None:
    """The decoder of the exchange's content coding; None, with the exchange's error naming the
    coding, when the client cannot read it."""
    try:
        return decoder_for(exchange.headers.get("content-encoding"))
    except CodingError as exc:
        exchange.error = str(exc)
        return None


def _decoded(decoder: Decoder) -> str:
    return "" if decoder.identity else f" once decoded ({decoder.coding})"


def _not_a_stream(exchange: Exchange) -> str:
    return (
        f"expected HTTP 200 with content-type text/event-stream, observed HTTP {exchange.status} "
        f"with content-type {exchange.content_type or '(none)'}: {exchange.body_preview()}"
    )


__all__ = [
    "Client",
    "Exchange",
    "StreamProgress",
    "StreamState",
    "discovery_deadline_s",
]
