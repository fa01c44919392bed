"""Bound sockets and uvicorn servers, all running in one asyncio loop.

Sockets are bound before any server starts, so every port (ephemeral ones included) is
known before the ready line is printed.  Servers never install signal handlers of their
own: the owner (the CLI, or the in-process deployment thread) decides when to stop, and
uvicorn's habit of re-raising a captured signal after shutdown would turn a clean SIGTERM
into a non-zero exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Generator
from dataclasses import dataclass

import uvicorn
from starlette.types import ASGIApp

GRACEFUL_SHUTDOWN_SECONDS = 2


def bind_socket(host: str, port: int = 0) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio only sets TCP_NODELAY on accepted sockets whose proto
    # is IPPROTO_TCP, and without it keep-alive requests stall 40 ms on delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
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
        servers = [
            _OwnedSignalsServer(
                uvicorn.Config(
                    listener.app,
                    lifespan="off",
                    log_level="warning",
                    access_log=False,
                    log_config=None,
                    timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
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
