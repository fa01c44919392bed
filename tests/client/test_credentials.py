"""Every request carries its plane's credentials and no other plane's; the exchange records
them by reference, and its curl reproducer replays with the variable set, never with the
secret on a command line."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from rl_conformance.client.http import Client
from rl_conformance.client.reproducers import reproduce, secrets_off_the_command_line
from rl_conformance.model.credentials import FRONTEND, LISTENER, WORKERS, read_credentials
from rl_conformance.redaction import REDACTOR

TOKEN = "frontend-token-0123456789"
ADMIN = "admin-token-abcdefghij"
FRONT, RL, WORKER = "http://gw:8000", "http://gw:8001", "http://10.0.0.7:9090"


@pytest.fixture(autouse=True)
def forget_secrets() -> Iterator[None]:
    yield
    REDACTOR.forget()


def credentials(monkeypatch: pytest.MonkeyPatch, frontend: str = FRONT, **extra: object):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DYNAMO_TOKEN", TOKEN)
    monkeypatch.setenv("ADMIN_TOKEN", ADMIN)
    return read_credentials(
        frontend=frontend,
        rl_url=RL,
        worker_urls=(),
        headers={},
        token_files={},
        token_envs={FRONTEND: "DYNAMO_TOKEN", WORKERS: "ADMIN_TOKEN", LISTENER: None},
        **extra,  # type: ignore[arg-type]
    )


def test_each_plane_receives_its_own_and_records_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, str | None] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        seen[str(request.url)] = request.headers.get("authorization")
        return httpx.Response(200, stream=httpx.ByteStream(b"{}"))

    client = Client(transport=httpx.MockTransport(answer), credentials=credentials(monkeypatch))
    front = client.get(f"{FRONT}/v1/models")
    client.get(f"{RL}/v1/rl/workers")
    admin = client.post(f"{WORKER}/engine/pause_generation", {})
    assert seen == {
        f"{FRONT}/v1/models": f"Bearer {TOKEN}",
        f"{RL}/v1/rl/workers": f"Bearer {TOKEN}",
        f"{WORKER}/engine/pause_generation": f"Bearer {ADMIN}",
    }
    assert front.request.headers["Authorization"] == "Bearer $DYNAMO_TOKEN"
    assert admin.request.headers["Authorization"] == "Bearer $ADMIN_TOKEN"
    log = json.dumps([front.wire_log(), admin.wire_log()])
    assert TOKEN not in log and ADMIN not in log
    assert '-H "Authorization: Bearer $DYNAMO_TOKEN"' in front.curl()


def test_a_client_without_credentials_sends_none(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, stream=httpx.ByteStream(b"{}"))

    Client(transport=httpx.MockTransport(answer)).get(f"{FRONT}/v1/models")
    assert seen == [None]


def test_a_secret_query_parameter_is_sent_and_recorded_by_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(200, stream=httpx.ByteStream(b"{}"))

    given = credentials(
        monkeypatch, frontend=f"{FRONT}/?code=query-secret-987", secret_query_params=("code",)
    )
    client = Client(transport=httpx.MockTransport(answer), credentials=given)
    exchange = client.get(f"{FRONT}/v1/models")
    assert sent == [f"{FRONT}/v1/models?code=query-secret-987"]
    assert exchange.request.url == f"{FRONT}/v1/models?code=$FRONTEND_CODE"
    assert '"http://gw:8000/v1/models?code=$FRONTEND_CODE"' in exchange.curl()


def test_a_replay_passes_the_secrets_to_curl_on_standard_input() -> None:
    REDACTOR.add(TOKEN, "$DYNAMO_TOKEN")
    argv = ["curl", "-sS", "-X", "GET", "http://h/?k=$DYNAMO_TOKEN", "-H", "X-A: b"]
    argv += ["-H", "Authorization: Bearer $DYNAMO_TOKEN"]
    kept, config = secrets_off_the_command_line(argv)
    assert kept == ["curl", "-sS", "-X", "GET", "-H", "X-A: b", "-K", "-"]
    assert config == f'url = "http://h/?k={TOKEN}"\nheader = "Authorization: Bearer {TOKEN}"\n'


class _Guarded(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        allowed = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        body = json.dumps({"allowed": allowed}).encode()
        self.send_response(200 if allowed else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


def test_a_reproducer_replays_against_a_server_that_requires_the_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Guarded)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with Client(credentials=credentials(monkeypatch, frontend=url)) as client:
            exchange = client.get(f"{url}/v1/models")
        assert exchange.status == 200
        replay = reproduce(exchange.curl(), exchange.wire_log())
    finally:
        server.shutdown()
    assert replay.reproduced is True, replay.detail
