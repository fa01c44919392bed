"""A forward HTTP proxy on loopback for tests: `CONNECT host:port` tunnels (https), requests in
absolute form forwarded one per connection (http), optional Basic credentials (407 without
them). It records what it was asked, so a test can tell that a request went through it."""

from __future__ import annotations

import base64
import contextlib
import select
import socket
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class Asked:
    method: str
    target: str
    authorization: str | None


@dataclass
class ForwardProxy:
    credentials: tuple[str, str] | None = None
    asked: list[Asked] = field(default_factory=list)
    url: str = ""
    _server: socketserver.ThreadingTCPServer | None = None

    def expected_authorization(self) -> str | None:
        if self.credentials is None:
            return None
        pair = ":".join(self.credentials).encode()
        return "Basic " + base64.b64encode(pair).decode()

    def handle(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            piece = client.recv(65536)
            if not piece:
                return
            head += piece
        raw, _, rest = head.partition(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [line.split(":", 1) for line in lines[1:]]
        authorization = next(
            (v.strip() for k, v in headers if k.strip().lower() == "proxy-authorization"), None
        )
        self.asked.append(Asked(method, target, authorization))
        if self.credentials is not None and authorization != self.expected_authorization():
            client.sendall(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                b'Proxy-Authenticate: Basic realm="test"\r\ncontent-length: 0\r\n\r\n'
            )
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            relay(client, upstream, rest)
            return
        parts = urlsplit(target)
        upstream = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=10)
        kept = [
            f"{k}:{v}"
            for k, v in headers
            if k.strip().lower() not in ("proxy-authorization", "connection", "proxy-connection")
        ]
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        forwarded = "\r\n".join([f"{method} {path} HTTP/1.1", *kept, "Connection: close"])
        relay(client, upstream, forwarded.encode("latin-1") + b"\r\n\r\n" + rest)

    @contextlib.contextmanager
    def running(self) -> Iterator[ForwardProxy]:
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with contextlib.suppress(OSError):
                    proxy.handle(self.request)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)


def relay(client: socket.socket, upstream: socket.socket, first: bytes) -> None:
    """Bytes both ways until either side closes."""
    with upstream:
        if first:
            upstream.sendall(first)
        sockets = [client, upstream]
        while True:
            readable, _, _ = select.select(sockets, [], [], 30)
            if not readable:
                return
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                (upstream if sock is client else client).sendall(data)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
