"""A plane that answers 401 or 403 is recognised before any test: the target is not reached, in
one sentence naming the plane and the flags that give its credentials (and which were given),
never a list of failures; a token refused mid-run leaves the target not reached from then on."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from rl_conformance.client.http import Client
from rl_conformance.client.refusals import CredentialsRefused
from rl_conformance.errors import LaunchError
from rl_conformance.launchers import ExternalLauncher
from rl_conformance.launchers.plan import TargetPool
from rl_conformance.model.credentials import FRONTEND, LISTENER, WORKERS, read_credentials
from rl_conformance.redaction import REDACTOR

FRONT, RL, WORKER = "http://f:8000", "http://f:8001", "http://10.0.0.7:9090"
TOKEN, ADMIN = "frontend-token-0123456789", "admin-token-abcdefghij"
WORKERS_BODY = {
    "protocol_version": 1,
    "workers": [
        {
            "instance_id": 1,
            "namespace": "dynamo",
            "system_url": WORKER,
            "routes": ["pause_generation", "resume_generation"],
        }
    ],
}


@pytest.fixture(autouse=True)
def forget_secrets() -> Iterator[None]:
    yield
    REDACTOR.forget()


def reply(status: int, document: Any) -> httpx.Response:
    return httpx.Response(status, stream=httpx.ByteStream(json.dumps(document).encode()))


def fleet(required: dict[str, str], status: int = 401) -> Callable[[httpx.Request], httpx.Response]:
    """A Dynamo-shaped deployment whose planes (by origin) require an Authorization value."""

    def handle(request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        origin = url[: url.index("/", len("http://"))]
        needed = required.get(origin)
        if needed is not None and request.headers.get("authorization") != needed:
            return reply(status, {"error": "Unauthorized"})
        if url.endswith("/v1/models"):
            return reply(200, {"object": "list", "data": [{"id": "toy"}]})
        if url.endswith("/v1/completions"):
            return reply(200, {"choices": [{"text": "a", "finish_reason": "length"}]})
        if url.endswith("/v1/rl/workers"):
            return reply(200, WORKERS_BODY)
        return reply(200 if url.endswith("/health") else 404, {})

    return handle


def start(
    handler: Callable[[httpx.Request], httpx.Response],
    monkeypatch: pytest.MonkeyPatch,
    envs: dict[str, str | None] | None = None,
) -> tuple[TargetPool, Client]:
    monkeypatch.setenv("DYNAMO_TOKEN", TOKEN)
    monkeypatch.setenv("ADMIN_TOKEN", ADMIN)
    credentials = read_credentials(
        frontend=FRONT,
        rl_url=RL,
        worker_urls=(),
        headers={},
        token_files={},
        token_envs=envs or {},
    )
    client = Client(transport=httpx.MockTransport(handler), credentials=credentials)
    launcher = ExternalLauncher("vllm", FRONT, rl_url=RL)
    return TargetPool({launcher.target_id: launcher}), client


def refused(pool: TargetPool, client: Client) -> str:
    with pytest.raises(LaunchError) as raised:
        pool.get("external-vllm", client)
    retired = pool.retired["external-vllm"]
    assert retired.unreached == str(raised.value)  # reported as given, not reached
    assert retired.frontend_url == FRONT
    return str(raised.value)


def test_a_frontend_without_credentials_names_the_flags_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool, client = start(fleet({FRONT: f"Bearer {TOKEN}", RL: f"Bearer {TOKEN}"}), monkeypatch)
    why = refused(pool, client)
    assert why == (
        "external-vllm: the frontend at http://f:8000 refuses requests without credentials (GET "
        "/v1/models answered HTTP 401 Unauthorized): give them with --header 'NAME: VALUE', "
        "--token-file FILE or --token-env VAR (and so does the RL listener at http://f:8001, "
        "which receives the frontend's credentials)"
    )


def test_wrong_credentials_are_named_by_their_flag_never_their_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool, client = start(fleet({FRONT: "Bearer another"}), monkeypatch, {FRONTEND: "DYNAMO_TOKEN"})
    why = refused(pool, client)
    assert "refused the credentials given (--token-env DYNAMO_TOKEN;" in why
    assert TOKEN not in why


def test_a_listener_with_credentials_of_its_own_gets_its_own_sentence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RL_TOKEN", "listener-token-0123456789")
    pool, client = start(
        fleet({FRONT: f"Bearer {TOKEN}", RL: "Bearer other"}),
        monkeypatch,
        {FRONTEND: "DYNAMO_TOKEN", LISTENER: "RL_TOKEN"},
    )
    why = refused(pool, client)
    assert why.startswith("external-vllm: the RL listener at http://f:8001 refused the credentials")
    assert "--rl-header 'NAME: VALUE', --rl-token-file FILE or --rl-token-env VAR" in why
    assert "frontend at" not in why


def test_a_discovered_worker_that_refuses_names_the_admin_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool, client = start(
        fleet({FRONT: f"Bearer {TOKEN}", WORKER: f"Bearer {ADMIN}"}, status=403),
        monkeypatch,
        {FRONTEND: "DYNAMO_TOKEN"},
    )
    why = refused(pool, client)
    assert why == (
        "external-vllm: the worker system server at http://10.0.0.7:9090 refuses requests "
        "without credentials (GET /health answered HTTP 403 Forbidden): give them with "
        "--admin-header 'NAME: VALUE', --admin-token-file FILE or --admin-token-env VAR"
    )


def test_with_every_plane_answered_the_target_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    pool, client = start(
        fleet({FRONT: f"Bearer {TOKEN}", RL: f"Bearer {TOKEN}", WORKER: f"Bearer {ADMIN}"}),
        monkeypatch,
        {FRONTEND: "DYNAMO_TOKEN", WORKERS: "ADMIN_TOKEN"},
    )
    target = pool.get("external-vllm", client)
    assert target.model == "toy" and target.unreached is None


def test_a_token_refused_mid_run_leaves_the_target_not_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    required = {FRONT: f"Bearer {TOKEN}", RL: f"Bearer {TOKEN}"}
    pool, client = start(fleet(required), monkeypatch, {FRONTEND: "DYNAMO_TOKEN"})
    target = pool.get("external-vllm", client)
    required[FRONT] = "Bearer rotated"  # the token expired
    with pytest.raises(CredentialsRefused) as first:
        client.post(f"{FRONT}/v1/completions", {"model": "toy", "prompt": [1]})
    assert first.value.evidence and "HTTP 401" in first.value.evidence[0].observed  # type: ignore[attr-defined]
    with pytest.raises(CredentialsRefused):  # at once, from the breaker
        client.get(f"{FRONT}/v1/models")
    pool.release("external-vllm", client)
    assert target.unreached is not None
    assert "refused the credentials given (--token-env DYNAMO_TOKEN" in target.unreached
