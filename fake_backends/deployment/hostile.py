"""A deployment that breaks HTTP itself: a raw-socket server on loopback where each path (or,
with a mode, every path) is one way a peer can misbehave below the contract: hang, stall after
the headers, drip one byte a second, reset, stream forever, send 50 MB, undecodable bytes, HTML,
a cross-host redirect. The harness must end a run against any of them in bounded time.

Each connection carries one request and is closed after it, unread body and all; every answer
says `connection: close`, so a client never sends its next request on a connection that is
going away (a race no path means to test)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    b"connection: close\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def json_response(
    body: bytes, status: str = "200 OK", content_type: str = "application/json"
) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + body


WEDGED_ANSWERS = {
    "/v1/models": b'{"object":"list","data":[{"id":"toy","object":"model","created":0,'
    b'"owned_by":"nvidia"}]}',
    "/v1/rl/workers": b'{"protocol_version":1,"namespace":"dynamo","workers":[]}',
}


def behave(path: str, conn: socket.socket, stop: threading.Event, request_path: str = "") -> None:
    if path == "/wedged":
        # Alive but stuck: model and worker listings answer, every generation hangs.
        answer = WEDGED_ANSWERS.get(request_path.split("?", 1)[0])
        if answer is None:
            stop.wait(600)
        else:
            conn.sendall(json_response(answer))
    elif path == "/stall":
        stop.wait(600)
    elif path == "/headers-then-stall":
        conn.sendall(SSE_HEAD)
        stop.wait(600)
    elif path == "/drip":
        conn.sendall(SSE_HEAD)
        while not stop.is_set():
            conn.sendall(chunk(b":"))
            time.sleep(0.2)
    elif path == "/drip-1bps":
        conn.sendall(SSE_HEAD)
        while not stop.wait(1.0):
            conn.sendall(chunk(b":"))
    elif path == "/html":
        conn.sendall(
            json_response(b"<html><body>a login page</body></html>", "200 OK", "text/html")
        )
    elif path == "/endless":
        conn.sendall(SSE_HEAD)
        event = chunk(b'data: {"choices":[{"index":0,"text":"x","finish_reason":null}]}\n\n')
        while not stop.is_set():
            conn.sendall(event)
    elif path == "/truncated-sse":
        conn.sendall(SSE_HEAD + chunk(b'data: {"choices":[{"index":0,"te') + b"0\r\n\r\n")
    elif path == "/invalid-json":
        conn.sendall(json_response(b"{not json"))
    elif path == "/html-500":
        conn.sendall(json_response(b"<html>oops</html>", "500 Internal Server Error", "text/html"))
    elif path == "/huge":
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 52428800\r\n\r\n"
        )
        block = b" " * 65536
        for _ in range(800):
            if stop.is_set():
                break
            conn.sendall(block)
    elif path == "/huge-chunked":
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        block = chunk(b" " * 65536)
        for _ in range(800):
            if stop.is_set():
                break
            conn.sendall(block)
    elif path == "/invalid-utf8-sse":
        conn.sendall(SSE_HEAD + chunk(b"data: \xff\xfe\n\n") + b"0\r\n\r\n")
    elif path == "/redirect":
        conn.sendall(
            b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.2:9/x\r\n"
            b"content-length: 0\r\nconnection: close\r\n\r\n"
        )
    elif path == "/reset":
        conn.sendall(SSE_HEAD + chunk(b'data: {"choices":[]}\n\n'))
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    elif path == "/wrong-content-type":
        conn.sendall(json_response(b"data: [DONE]\n\n", content_type="text/plain"))


MODES = (
    "wedged",
    "stall",
    "headers-then-stall",
    "drip-1bps",
    "truncated-sse",
    "invalid-json",
    "huge",
    "invalid-utf8-sse",
    "html",
    "reset",
    "html-500",
    "redirect",
    "endless",
)
"""Ways a whole deployment can be dead, wedged or hostile: `hostile_server(mode)` answers every
request of every path that way."""


@contextmanager
def hostile_server(mode: str | None = None) -> Iterator[str]:
    """Each path one misbehaviour; with `mode`, every path misbehaves that way."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def handle(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                piece = conn.recv(65536)
                if not piece:
                    return
                data += piece
            requested = data.split(b" ", 2)[1].decode()
            try:
                behave(f"/{mode}" if mode else requested, conn, stop, requested)
            except OSError:
                return

    def serve(accept: Callable[[], tuple[socket.socket, object]] = listener.accept) -> None:
        while not stop.is_set():
            try:
                conn, _ = accept()
            except (TimeoutError, OSError):
                continue
            thread = threading.Thread(target=handle, args=(conn,), daemon=True)
            thread.start()
            threads.append(thread)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        server.join(timeout=2)
        for thread in threads:
            thread.join(timeout=2)
        listener.close()
