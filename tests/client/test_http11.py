"""The client's HTTP/1.1 connections (`client.http11`) against scripted raw-socket peers: what
is sent, each body framing, connection reuse and when it is refused, interim answers, and every
way a peer can break the protocol ending in a named error, never a crash or a hang.
(Stalling, dripping, endless and reset peers are `test_client.py`'s, through `Client`.)"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from rl_conformance.client.breaker import CircuitBreaker
from rl_conformance.client.http import Client
from rl_conformance.client.http11 import WireError, address_of
from rl_conformance.client.network import Network, Trust
from rl_conformance.client.pool import ConnectionPool, fetch

Script = Callable[[socket.socket, "Peer"], None]


JSON_OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


class Peer:
    """A loopback server running `script` on each connection it accepts; it keeps each
    request's bytes and counts connections."""

    def __init__(self, script: Script, tls: ssl.SSLContext | None = None) -> None:
        self.script = script
        self.tls = tls
        self.requests: list[bytes] = []
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.accepted: list[socket.socket] = []
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.listener.getsockname()[1]}"

    def read_request(self, conn: socket.socket) -> bytes:
        """One request's head and its Content-Length body; b"" once the client closed."""
        data = b""
        while b"\r\n\r\n" not in data:
            piece = conn.recv(65536)
            if not piece:
                return b""
            data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            body += conn.recv(65536)
        self.requests.append(head + b"\r\n\r\n" + body)
        return data

    def serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            self.accepted.append(conn)
            thread = threading.Thread(target=self._run, args=(conn,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _run(self, conn: socket.socket) -> None:
        with suppress(OSError), conn:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)  # a refused handshake ends here
            self.script(conn, self)


@contextmanager
def peer(script: Script, tls: ssl.SSLContext | None = None) -> Iterator[Peer]:
    server = Peer(script, tls)
    accepting = threading.Thread(target=server.serve, daemon=True)
    accepting.start()
    try:
        yield server
    finally:
        server.stop.set()
        accepting.join(timeout=2)
        for conn in server.accepted:  # a script waiting for the client's next request ends
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in server.threads:
            thread.join(timeout=2)
        server.listener.close()


def answer_each(*answers: bytes) -> Script:
    """Answer the connection's requests in turn, then wait for the client to close."""

    def script(conn: socket.socket, server: Peer) -> None:
        for answer in answers:
            if not server.read_request(conn):
                return
            conn.sendall(answer)
        server.read_request(conn)

    return script


@pytest.fixture
def client() -> Iterator[Client]:
    with Client(deadline_s=5.0, breaker=CircuitBreaker(threshold=0)) as made:
        yield made


def test_the_request_line_host_and_body_headers_are_what_http_1_1_asks(client: Client) -> None:
    with peer(answer_each(JSON_OK, JSON_OK, JSON_OK)) as server:
        client.get(server.url + "/v1/models?x=a b")
        client.post(server.url + "/engine/pause", {"mode": "keep"})
        client.request("POST", server.url + "/engine/resume")
    get, post, empty = (request.decode() for request in server.requests)
    port = server.url.rsplit(":", 1)[1]
    assert get.startswith("GET /v1/models?x=a%20b HTTP/1.1\r\n")
    assert f"\r\nHost: 127.0.0.1:{port}\r\n" in get
    assert "\r\nAccept-Encoding: " in get and "content-length" not in get.lower()
    assert "\r\nUser-Agent: dynamo-rl-conformance/" in get
    assert post.startswith("POST /engine/pause HTTP/1.1\r\n")
    assert "\r\nContent-Type: application/json\r\n" in post
    assert post.endswith('\r\nContent-Length: 15\r\n\r\n{"mode":"keep"}')
    assert "\r\nContent-Length: 0\r\n" in empty  # a POST without a body still says so


def test_a_request_naming_its_own_accept_encoding_sends_only_that(client: Client) -> None:
    with peer(answer_each(JSON_OK)) as server:
        client.get(server.url + "/x", headers={"accept-encoding": "identity"})
    head = server.requests[0].decode().lower()
    assert head.count("accept-encoding:") == 1 and "accept-encoding: identity" in head


def test_connections_are_reused_and_one_the_peer_closed_is_not(client: Client) -> None:
    closing = JSON_OK.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n", 1)
    with peer(answer_each(JSON_OK, JSON_OK, closing)) as server:
        answers = [client.get(server.url + "/x") for _ in range(4)]
    assert [a.status for a in answers] == [200] * 4, [a.error for a in answers]
    assert server.connections == 2  # three on the first connection, the fourth on a new one


def test_an_idle_connection_the_peer_dropped_is_replaced_not_failed(client: Client) -> None:
    def once_then_hang_up(conn: socket.socket, server: Peer) -> None:
        server.read_request(conn)
        conn.sendall(JSON_OK)

    with peer(once_then_hang_up) as server:
        first = client.get(server.url + "/x")
        time.sleep(0.2)  # the peer's close has arrived: the idle connection reads as closed
        second = client.get(server.url + "/x")
    assert (first.status, second.status) == (200, 200), second.error
    assert server.connections == 2


def test_an_idle_connection_past_its_expiry_is_not_reused() -> None:
    pool = ConnectionPool(keepalive_expiry=0.05)
    with peer(answer_each(JSON_OK, JSON_OK)) as server:
        for _ in range(2):
            response = pool.send("GET", server.url + "/x", [], None, time.monotonic() + 5)
            assert b"".join(response.iter_raw()) == b"{}"
            response.close()
            time.sleep(0.1)
        pool.close()
    assert server.connections == 2


def test_chunked_bodies_with_extensions_and_trailers_are_read_whole(client: Client) -> None:
    answer = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        b'3;note=x\r\n{"a\r\n5\r\n": 1}\r\n0\r\nx-trailer: yes\r\n\r\n'
    )
    with peer(answer_each(answer, JSON_OK)) as server:
        first = client.get(server.url + "/x")
        second = client.get(server.url + "/x")
    assert first.json() == {"a": 1} and second.json() == {}
    assert server.connections == 1


def test_a_body_delimited_by_the_close_is_read_to_the_end(client: Client) -> None:
    def http10(conn: socket.socket, server: Peer) -> None:
        server.read_request(conn)
        conn.sendall(b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n")
        time.sleep(0.05)
        conn.sendall(b'{"done": true}')

    with peer(http10) as server:
        exchange = client.get(server.url + "/x")
    assert exchange.json() == {"done": True} and exchange.error is None


def test_interim_answers_are_skipped(client: Client) -> None:
    with peer(answer_each(b"HTTP/1.1 100 Continue\r\n\r\n" + JSON_OK)) as server:
        exchange = client.get(server.url + "/x")
    assert exchange.status == 200 and exchange.json() == {}


def test_repeated_headers_are_joined(client: Client) -> None:
    answer = JSON_OK.replace(b"\r\n\r\n", b"\r\nx-seen: a\r\nX-Seen: b\r\n\r\n", 1)
    with peer(answer_each(answer)) as server:
        exchange = client.get(server.url + "/x")
    assert exchange.headers["x-seen"] == "a, b"


BROKEN = {
    "cut body": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{}",
        "complete message body: received 2 bytes, expected 10",
    ),
    "cut chunk": (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\na\r\n{}",
        "complete message body",
    ),
    "bad chunk size": (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        "expected a hex chunk size, observed b'zz'",
    ),
    "conflicting lengths": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",
        "expected one decimal Content-Length, observed '2, 3'",
    ),
    "gzip transfer coding": (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        "expected Transfer-Encoding: chunked",
    ),
    "not http": (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "expected an HTTP/1.x status line"),
    "bad header": (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "expected a header line"),
    "nothing": (b"", "Server disconnected without sending a response."),
    "half a head": (b"HTTP/1.1 200 OK\r\ncontent-", "in the middle of the response head"),
    "endless head": (b"HTTP/1.1 200 OK\r\n" + b"x-pad: " + b"y" * 70_000, "longer than 65536"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_peer_breaking_http_gets_a_named_error(client: Client, case: str) -> None:
    answer, expected = BROKEN[case]

    def script(conn: socket.socket, server: Peer) -> None:
        server.read_request(conn)
        conn.sendall(answer)
        conn.shutdown(socket.SHUT_WR)

    with peer(script) as server:
        exchange = client.get(server.url + "/x")
    assert exchange.error is not None and "(RemoteProtocolError)" in exchange.error
    assert expected in exchange.error


@pytest.mark.parametrize(
    ("url", "headers", "expected"),
    [
        ("ftp://127.0.0.1/x", {}, "(UnsupportedProtocol): expected an http:// or https:// URL"),
        ("http:///x", {}, "(UnsupportedProtocol): the URL 'http:///x' names no host"),
        ("http://127.0.0.1:99999/x", {}, "(UnsupportedProtocol): not a usable URL"),
        ("http://127.0.0.1:9/x", {"X-Evil": "a\r\nInjected: 1"}, "(LocalProtocolError)"),
        ("http://127.0.0.1:9/x", {"X-Name": "caf\u00e9\u2603"}, "(LocalProtocolError)"),
    ],
)
def test_a_request_that_cannot_be_sent_is_an_error_not_an_exception(
    client: Client, url: str, headers: dict[str, str], expected: str
) -> None:
    exchange = client.get(url, headers=headers)
    assert exchange.status is None and expected in (exchange.error or "")


def test_closing_the_client_ends_a_request_another_thread_is_reading(client: Client) -> None:
    def stall(conn: socket.socket, server: Peer) -> None:
        server.read_request(conn)
        server.stop.wait(10)

    with peer(stall) as server:
        done: list[float] = []
        errors: list[str | None] = []

        def read() -> None:
            errors.append(client.get(server.url + "/x").error)
            done.append(time.monotonic())

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.3)
        closed_at = time.monotonic()
        client.close()
        reader.join(timeout=4)
        server.stop.set()
    assert done and done[0] - closed_at < 2.0  # at once, not at the 5 s deadline
    assert errors == ["transport error (ReadError): the client was closed"]
    later = client.get(server.url + "/x")
    assert later.error == "transport error (ConnectError): the client was closed"


def test_urls_keep_their_authority_and_quote_their_target() -> None:
    address = address_of("http://user@[::1]:8000/a b/%41?q=1&r=é#frag")
    assert (address.host, address.port, address.authority) == ("::1", 8000, "[::1]:8000")
    assert address.target == "/a%20b/%41?q=1&r=%C3%A9"
    assert address_of("https://example.test").target == "/"
    assert address_of("https://example.test").port == 443


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a certificate")
    directory = tmp_path_factory.mktemp("tls")
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return key, cert


def test_https_is_spoken_and_the_peer_certificate_verified(certificate: tuple[Path, Path]) -> None:
    key, cert = certificate
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(cert, key)
    trusting = Network(trust=Trust(ca=str(cert), ca_source="--ca-bundle"))
    with peer(answer_each(JSON_OK, JSON_OK), tls=serving) as server:
        pool = ConnectionPool(network=trusting, keepalive_expiry=5)
        for _ in range(2):
            response = pool.send("GET", server.url + "/x", [], None, time.monotonic() + 5)
            assert response.status_code == 200 and b"".join(response.iter_raw()) == b"{}"
            response.close()
        pool.close()
        assert server.connections == 1
        with Client(deadline_s=5, breaker=CircuitBreaker(threshold=0)) as untrusting:
            refused = untrusting.get(server.url + "/x")
    assert "(ConnectError)" in (refused.error or "")
    assert "not signed by a CA this run trusts (self-signed certificate" in (refused.error or "")


def test_fetch_reads_a_whole_answer_on_a_connection_of_its_own() -> None:
    with peer(answer_each(JSON_OK)) as server:
        answer = fetch("POST", server.url + "/control", json_body={"a": 1}, deadline_s=5)
    assert (answer.status, answer.json(), answer.text) == (200, {}, "{}")
    assert server.requests[0].endswith(b'\r\n\r\n{"a": 1}')
    with pytest.raises(WireError, match=r"Connection refused") as refused:
        fetch("GET", server.url + "/control", deadline_s=5)  # the peer is gone
    assert refused.value.kind == "ConnectError"
