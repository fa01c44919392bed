"""Bound sockets and uvicorn servers, all running in one asyncio loop.

Sockets are bound before any server starts, so every port (ephemeral ones included) is
known before the ready line is printed.  Servers never install signal handlers of their
own: the owner (the CLI, or the in-process deployment thread) decides when to stop, and
uvicorn's habit of re-raising a captured signal after shutdown would turn a clean SIGTERM
into a non-zero exit.

Speed: the CLI runs its loop on uvloop and uvicorn parses HTTP with httptools when they are
importable (without them: asyncio's loop and h11, the same answers byte for byte), and the
bytes a connection writes in one turn of the loop leave in one send (``CoalescingTransport``):
uvicorn writes a response's head and its body separately, so a client would otherwise wake up
and read twice per response.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import uvicorn
from starlette.types import ASGIApp

GRACEFUL_SHUTDOWN_SECONDS = 2
KEEP_ALIVE_SECONDS = 75
"""Idle client connections stay open longer than the clients' own pool expiry (httpx: 5 s), so
no client reuses a connection at the moment the server closes it (a reset under load)."""
YOUNG_GC_THRESHOLD = 10_000
LISTEN_BACKLOG = 2048  # a thousand clients connecting at once are not dropped (uvicorn's default)

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is importable; None (asyncio's default loop) otherwise."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_fast(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the fastest event loop available (``loop_factory``)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)


def settle_heap() -> None:
    """Before serving, in a process of its own: exempt everything start-up built from garbage
    collection (``gc.freeze``) and collect the youngest generation every 10,000 allocations
    instead of 700. Why: with a thousand streams in flight each collection walks all of them,
    a few per cent of a stream's time."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])


def bind_socket(host: str, port: int = 0) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio only sets TCP_NODELAY on accepted sockets whose proto
    # is IPPROTO_TCP, and without it keep-alive requests stall 40 ms on delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def advertised_host(host: str) -> str:
    """A wildcard bind is reached through loopback from this machine."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def socket_url(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = advertised_host(host)
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


class CoalescingTransport:
    """A connection's transport whose writes leave at the end of the loop's current turn, joined
    into one send (a response head written alone waits one more turn, for the first bytes of its
    body); everything else is the wrapped transport's. Closing sends what is pending first;
    aborting drops it, as the transport itself would."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._pending: list[bytes] = []
        self._held = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._end_of_turn)
        self._pending.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def _end_of_turn(self) -> None:
        if len(self._pending) == 1 and not self._held and self._pending[0].startswith(b"HTTP/"):
            self._held = True
            asyncio.get_running_loop().call_soon(self._end_of_turn)
            return
        self.flush()

    def flush(self) -> None:
        """Send what is pending now."""
        self._held = False
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        if not self._transport.is_closing():  # the connection was lost meanwhile: dropped
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(p) for p in self._pending)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _http_protocol() -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools when importable, else h11) on a
    ``CoalescingTransport``."""
    base: type[Any]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:  # pragma: no cover - httptools is not installed
        from uvicorn.protocols.http.h11_impl import H11Protocol as base

    class CoalescingProtocol(base):
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(CoalescingTransport(transport))

        def on_response_complete(self) -> None:
            # The whole response is written: it leaves now, not at the end of the turn.
            if isinstance(self.transport, CoalescingTransport):
                self.transport.flush()
            super().on_response_complete()

    return CoalescingProtocol


class _OwnedSignalsServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@dataclass
class Listener:
    name: str
    app: ASGIApp
    sock: socket.socket


class ServerGroup:
    """Serves several apps on their own sockets until told to stop."""

    def __init__(self, listeners: list[Listener]) -> None:
        self.listeners = listeners

    def close_sockets(self) -> None:
        for listener in self.listeners:
            listener.sock.close()

    async def serve(self, stop: asyncio.Event, on_ready: Callable[[], None] | None = None) -> None:
        protocol = _http_protocol()
        servers = [
            _OwnedSignalsServer(
                uvicorn.Config(
                    listener.app,
                    lifespan="off",
                    http=protocol,
                    log_level="warning",
                    access_log=False,
                    proxy_headers=False,  # no proxy in front: X-Forwarded-* is not trusted
                    log_config=None,
                    timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
                    timeout_keep_alive=KEEP_ALIVE_SECONDS,
                )
            )
            for listener in self.listeners
        ]
        tasks = [
            asyncio.create_task(
                server.serve(sockets=[listener.sock]), name=f"serve-{listener.name}"
            )
            for server, listener in zip(servers, self.listeners, strict=True)
        ]
        stopper = asyncio.create_task(stop.wait(), name="stop-wait")
        try:
            while not all(s.started for s in servers):
                failed = [t for t in tasks if t.done()]
                if failed:
                    failed[0].result()  # re-raise the start-up failure
                    raise RuntimeError(f"{failed[0].get_name()} exited during start-up")
                await asyncio.sleep(0.005)
            if on_ready is not None:
                on_ready()
            done, _ = await asyncio.wait({stopper, *tasks}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stopper:
                    task.result()
        finally:
            stopper.cancel()
            for server in servers:
                server.should_exit = True
            await asyncio.gather(*tasks, return_exceptions=True)
            self.close_sockets()
