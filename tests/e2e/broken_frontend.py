"""A frontend that answers every route with broken data: wrong types, invalid JSON, truncated
streams. Raw sockets on loopback, so nothing in it can accidentally be well-formed."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def _response(status: str, body: bytes, content_type: str = "application/json") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + body


def _answer(method: str, path: str, body: bytes) -> bytes:
    if path == "/v1/models":
        return _response("200 OK", json.dumps({"object": "list", "data": [{"id": "toy"}]}).encode())
    if path == "/v1/completions":
        request = json.loads(body or b"{}")
        if request.get("stream"):
            stream = (
                b'data: {"choices":[{"index":0,"text":"a","finish_reason":null}]}\n\ndata: {"cho'
            )
            return (
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"connection: close\r\n\r\n" + stream
            )
        wrong = {
            "id": 7,
            "object": "text_completion",
            "created": 1,
            "model": "toy",
            "choices": "not-a-list",
            "usage": {"prompt_tokens": "three"},
            "nvext": {"completion_token_ids": "12 13"},
        }
        return _response("200 OK", json.dumps(wrong).encode())
    if path == "/v1/chat/completions":
        return _response("200 OK", b"{not json")
    return _response("404 Not Found", b"")


@contextmanager
def broken_frontend() -> Iterator[str]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                piece = conn.recv(65536)
                if not piece:
                    return
                data += piece
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = next(
                (
                    int(line.split(":", 1)[1])
                    for line in lines[1:]
                    if line.lower().startswith("content-length:")
                ),
                0,
            )
            while len(body) < length:
                piece = conn.recv(65536)
                if not piece:
                    break
                body += piece
            conn.sendall(_answer(method, path, body))

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()
