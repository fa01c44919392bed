"""A recording proxy in front of a fleet: one listener per upstream origin (frontend, RL listener,
each worker's system server), every request written to the `AuditLog`, and a scenario's
`Injection` (`injection.py`) deciding what the adapter sees: a held, cut, paced or replaced
response, or a rewritten discovery body.

Discovery bodies always name the proxied system URLs, so an adapter that follows the contract
(`system_url` verbatim) is seen, and one that derives URLs from elsewhere is not.

Content codings: the proxy asks the deployment for the codings the adapter accepts that it can
read itself (`codings.ACCEPTED`), records and judges every body DECODED, and delivers it
re-encoded in the coding the deployment answered in (each stream event flushed on its own). It
must see event boundaries to record, hold, pace, cut or rewrite a reply, so the deployment's own
bytes cannot pass through untouched; re-encoding them in the deployment's coding keeps what the
adapter meets faithful (an adapter that cannot read the coding it asked for fails as it would
against the deployment), where delivering them decoded would hide the coding from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import uvicorn

from ..client.codings import ACCEPTED, Encoder, decoder_for
from .audit import RL, WORKER_PREFIX, AuditLog, AuditRecord, Delivery
from .injection import Action, CutAfter, Hold, Injection, Pace, Respond, Rewrite, SlowEngine

HOST = "127.0.0.1"
FORWARDED_HEADERS = ("content-type", "x-request-id", "accept")
RECORDED_HEADERS = ("x-request-id", "content-type")
START_TIMEOUT_S = 10.0

TOKEN_DELAY_HEADER = "x-fake-token-delay-ms"
"""The header our fake deployment paces its engine by (`SlowEngine`)."""


def _rewritten_event(record: AuditRecord, action: Rewrite, block: bytes) -> bytes:
    """One stream event as a `Rewrite` changes it; `[DONE]` and non-JSON events as they are."""
    payload = _event_payload(block)
    changed = action.apply(payload)
    if changed == payload:
        return block
    record.rewritten = action.what
    return b"data: " + json.dumps(changed).encode()


class _StreamCut(Exception):
    """Raised out of the ASGI app to make the server drop the connection mid-stream."""


def _not_a_stream_cut(record: logging.LogRecord) -> bool:
    return not (record.exc_info and isinstance(record.exc_info[1], _StreamCut))


logging.getLogger("uvicorn.error").addFilter(_not_a_stream_cut)

KEEP_ALIVE_S = 75
"""How long an idle client connection stays open: longer than the clients' own pool expiry
(httpx: 5 s), so a client never reuses a connection the server is closing at that moment (seen
as `Connection reset by peer` on a loaded machine when both sides used 5 s)."""


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _event_payload(block: bytes) -> Any:
    lines = [line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:")]
    data = b"\n".join(lines)
    return "[DONE]" if data == b"[DONE]" else _parse(data)


class _Forwarder:
    """The ASGI app of one proxied origin."""

    def __init__(
        self,
        plane: str,
        upstream: str,
        proxy: RecordingProxy,
    ) -> None:
        self.plane = plane
        self.upstream = upstream.rstrip("/")
        self.proxy = proxy

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = bytearray()
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        path = scope["path"]
        query = scope.get("query_string", b"").decode()
        log = self.proxy.log
        truth = await self._listener_truth(path) if self.plane.startswith(WORKER_PREFIX) else None
        record = log.open(
            self.plane,
            scope["method"],
            path,
            {k: headers[k] for k in RECORDED_HEADERS if k in headers},
            _parse(bytes(raw)),
        )
        record.truth = truth
        gone = asyncio.Event()

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    return

        watcher = asyncio.create_task(watch())
        injection = self.proxy.injection
        try:
            action = injection.intercept(record, log) if injection.armed else None
            record.staged = action is not None and not getattr(action, "legal", False)
            if isinstance(action, Respond):
                record.delivery = Delivery.INJECTED
                await self._reply(send, record, action)
                return
            url = self.upstream + path + (f"?{query}" if query else "")
            forwarded = {k: headers[k] for k in FORWARDED_HEADERS if k in headers}
            forwarded["accept-encoding"] = readable_codings(headers.get("accept-encoding"))
            if isinstance(action, SlowEngine):
                forwarded[TOKEN_DELAY_HEADER] = str(action.token_delay_ms)
            request = self.proxy.client.build_request(
                scope["method"], url, content=bytes(raw), headers=forwarded
            )
            response = await self.proxy.client.send(request, stream=True)
            try:
                kind = response.headers.get("content-type", "")
                if "text/event-stream" in kind:
                    await self._stream(send, record, response, action, gone)
                else:
                    await self._unary(send, record, response, action, gone)
            finally:
                await response.aclose()
        finally:
            record.finished = time.monotonic()
            watcher.cancel()

    async def _unary(
        self,
        send: Any,
        record: AuditRecord,
        response: httpx.Response,
        action: Action | None,
        gone: asyncio.Event,
    ) -> None:
        kind = response.headers.get("content-type", "")
        decoder = decoder_for(response.headers.get("content-encoding"))
        body = b"".join([decoder.feed(raw, UNCAPPED) async for raw in response.aiter_raw()])
        decoder.finish()
        if isinstance(action, Hold):
            record.held = True
            await asyncio.sleep(action.seconds)
        if record.plane == RL and record.path == "/v1/rl/workers":
            body = self._rewrite_discovery(body, self.proxy.log)
        if isinstance(action, Rewrite) and response.status_code == 200:
            body = self._rewritten(record, action, body)
        record.status = response.status_code
        record.response = _parse(body)
        if gone.is_set():
            record.delivery = Delivery.CLIENT_GONE
        encoder = Encoder(decoder.coding)
        body = encoder.feed(body) + encoder.finish()
        if isinstance(action, CutAfter) and body and not gone.is_set():
            await self._cut(send, record, response.status_code, kind, body, decoder.coding)
        await self._send_bytes(send, response.status_code, kind, body, decoder.coding)

    async def _cut(
        self, send: Any, record: AuditRecord, status: int, kind: str, body: bytes, coding: str
    ) -> None:
        """A unary reply's `CutAfter`: its `content-length` announces the whole body, the first
        half is sent, then the connection drops, so the client meets an incomplete read (a
        transport error), never a valid reply."""
        part = body[: len(body) // 2]
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": _headers(kind, body, coding),
            }
        )
        await send({"type": "http.response.body", "body": part, "more_body": True})
        record.delivery = Delivery.CUT
        record.delivered_bytes = len(part)
        raise _StreamCut

    @staticmethod
    def _rewritten(record: AuditRecord, action: Rewrite, body: bytes) -> bytes:
        """A unary reply's `Rewrite`: the body as the scenario changed it (recorded as such
        when the change changed anything)."""
        document = _parse(body)
        changed = action.apply(document)
        if changed == document:
            return body
        record.rewritten = action.what
        return json.dumps(changed).encode()

    def _rewrite_discovery(self, body: bytes, log: AuditLog) -> bytes:
        document = _parse(body)
        if not isinstance(document, dict):
            return body
        return json.dumps(self._as_listed(document, log)).encode()

    def _as_listed(self, document: dict[str, Any], log: AuditLog) -> dict[str, Any]:
        """A discovery body as the adapter is shown it: the proxy's worker URLs, then the
        scenario's events."""
        for worker in document.get("workers") or []:
            if isinstance(worker, dict) and worker.get("system_url") in self.proxy.public:
                worker["system_url"] = self.proxy.public[worker["system_url"]]
        injection = self.proxy.injection
        return injection.discovery(document, log) if injection.armed else document

    async def _listener_truth(self, path: str) -> dict[str, Any] | None:
        """What the listener lists at the moment a worker call arrives, as a read would show it
        (not recorded as one of the adapter's reads): the call is judged against this, not
        against the adapter's last read. None where nothing is discovered or the read failed."""
        rl = self.proxy.upstreams.get(RL)
        fleet = self.proxy.injection.fleet
        route = path.removeprefix("/engine/")
        if rl is None or route == path or route in fleet.read_only or not fleet.discovered:
            return None  # only a mutating call is judged against the listener's truth
        try:
            reply = await self.proxy.client.get(rl.rstrip("/") + "/v1/rl/workers")
            document = reply.json()
        except (httpx.HTTPError, ValueError):
            return None
        if not isinstance(document, dict):
            return None
        return self._as_listed(document, self.proxy.log)

    async def _stream(
        self,
        send: Any,
        record: AuditRecord,
        response: httpx.Response,
        action: Action | None,
        gone: asyncio.Event,
    ) -> None:
        record.status = response.status_code
        held = isinstance(action, Hold)
        blocks: list[bytes] = []
        started = False
        buffer = b""
        cut = False
        lost = False  # the client left before an event reached it
        decoder = decoder_for(response.headers.get("content-encoding"))
        encoder = Encoder(decoder.coding)
        start = self._stream_start(send, response.status_code, decoder.coding)
        async for raw in response.aiter_raw():
            chunk = decoder.feed(raw, UNCAPPED)
            buffer += chunk.replace(b"\r\n", b"\n")
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                if not block.strip():
                    continue
                record.upstream_events.append(_event_payload(block))
                if isinstance(action, Rewrite):
                    block = _rewritten_event(record, action, block)
                if held:
                    blocks.append(block)
                    continue
                if cut or gone.is_set():
                    lost = lost or gone.is_set()
                    continue
                if not started:
                    await start()
                    started = True
                if isinstance(action, Pace):
                    await asyncio.sleep(action.seconds)
                if gone.is_set():
                    lost = True
                    continue
                await send(
                    {
                        "type": "http.response.body",
                        "body": encoder.feed(block + b"\n\n"),
                        "more_body": True,
                    }
                )
                record.events.append(_event_payload(block))
                record.event_times.append(time.monotonic())
                if isinstance(action, CutAfter) and len(record.events) >= action.events:
                    cut = True
        if held:
            record.held = True
            await asyncio.sleep(action.seconds)  # type: ignore[union-attr]
            if gone.is_set():
                record.delivery = Delivery.CLIENT_GONE
                return
            await start()
            for block in blocks:
                await send(
                    {
                        "type": "http.response.body",
                        "body": encoder.feed(block + b"\n\n"),
                        "more_body": True,
                    }
                )
                record.events.append(_event_payload(block))
                record.event_times.append(time.monotonic())
            started = True
        if lost:
            record.delivery = Delivery.CLIENT_GONE
            return
        if cut:
            record.delivery = Delivery.CUT
            raise _StreamCut
        if not started:
            await start()
        if not gone.is_set():
            await send({"type": "http.response.body", "body": encoder.finish(), "more_body": False})

    async def _reply(self, send: Any, record: AuditRecord, action: Respond) -> None:
        record.status = action.status
        record.response = action.body
        if action.kind == "application/json":
            payload = json.dumps(action.body).encode()
        else:
            payload = str(action.body).encode()
        await self._send_bytes(send, action.status, action.kind, payload)

    @staticmethod
    def _stream_start(send: Any, status: int, coding: str) -> Callable[[], Awaitable[None]]:
        """What starts the event stream the adapter receives, in the deployment's coding."""
        headers = [(b"content-type", b"text/event-stream"), *_coding_header(coding)]

        async def start() -> None:
            await send({"type": "http.response.start", "status": status, "headers": headers})

        return start

    async def _send_bytes(
        self, send: Any, status: int, kind: str, body: bytes, coding: str = "identity"
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": _headers(kind, body, coding),
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})


UNCAPPED = 1 << 62
"""The proxy keeps no byte caps: it stands between an adapter and a fleet of our own."""


def readable_codings(accepted: str | None) -> str:
    """The `Accept-Encoding` the proxy sends upstream: the codings the adapter accepts that the
    proxy can decode, else identity (an adapter that asked for nothing gets no coding)."""
    wanted = {
        part.split(";")[0].strip().lower()
        for part in (accepted or "").split(",")
        if not part.replace(" ", "").endswith(";q=0")
    }
    return ", ".join(name for name in ACCEPTED if name in wanted) or "identity"


def _coding_header(coding: str) -> list[tuple[bytes, bytes]]:
    return [] if coding == "identity" else [(b"content-encoding", coding.encode())]


def _headers(kind: str, body: bytes, coding: str = "identity") -> list[tuple[bytes, bytes]]:
    return [
        (b"content-type", (kind or "application/json").encode()),
        (b"content-length", str(len(body)).encode()),
        *_coding_header(coding),
    ]


class RecordingProxy:
    """`with RecordingProxy({"frontend": url, "rl": url, "worker:<id>": url}, injection) as p:`
    then `p.url("frontend")`. Binds 127.0.0.1 on ephemeral ports; stops its servers on exit."""

    def __init__(self, upstreams: dict[str, str], injection: Injection, log: AuditLog) -> None:
        self.upstreams = dict(upstreams)
        self.injection = injection
        self.log = log
        self.public: dict[str, str] = {}
        self._sockets: dict[str, socket.socket] = {}
        self._servers: list[uvicorn.Server] = []
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.client: httpx.AsyncClient

    def url(self, plane: str) -> str:
        host, port = self._sockets[plane].getsockname()[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> RecordingProxy:
        for plane in self.upstreams:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((HOST, 0))
            sock.listen(128)
            self._sockets[plane] = sock
        self.public = {url.rstrip("/"): self.url(plane) for plane, url in self.upstreams.items()}
        self._thread = threading.Thread(target=self._serve, name="certify-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S) or self._failure is not None:
            self.__exit__(None, None, None)
            raise RuntimeError(f"the recording proxy did not start: {self._failure!r}")
        return self

    def _serve(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._failure = exc
            self._ready.set()

    async def _main(self) -> None:
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(30.0))
        for plane, upstream in self.upstreams.items():
            config = uvicorn.Config(
                _Forwarder(plane, upstream, self),
                log_level="warning",
                log_config=None,  # never reconfigure logging: many servers start concurrently
                lifespan="off",
                access_log=False,
                timeout_graceful_shutdown=1,
                timeout_keep_alive=KEEP_ALIVE_S,
            )
            self._servers.append(uvicorn.Server(config))
        tasks = [
            asyncio.create_task(server.serve(sockets=[self._sockets[plane]]))
            for server, plane in zip(self._servers, self.upstreams, strict=True)
        ]
        while not all(server.started for server in self._servers):
            await asyncio.sleep(0.01)
        self._ready.set()
        try:
            await asyncio.gather(*tasks)
        finally:
            await self.client.aclose()

    def __exit__(self, *exc: object) -> None:
        for server in self._servers:
            server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        for sock in self._sockets.values():
            with contextlib.suppress(OSError):
                sock.close()
