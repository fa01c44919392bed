"""The preflight names what a person got wrong before any test, in one sentence with the fix:
the frontend (or its OpenAI base URL, `/v1`) given as the RL URL, the RL listener given as the
frontend, the two swapped, either with a path, a web server that is not Dynamo, a `--worker` id
discovery does not list. Each is `WrongInput` (the run exits 2, `preflight refused`); what a
faithful deployment may answer (a listener behind a path of one gateway, a server error, a
discovery still empty, an id it does not state as an integer) is never held against the user.

The deployment here answers as the real Dynamo 1.6.1 does (measured on its frontend and RL
listener): the frontend answers a path it does not serve with 404 and a JSON body, the listener
with 404 and an empty body."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from rl_conformance.client.http import Client
from rl_conformance.errors import LaunchError, WrongInput
from rl_conformance.launchers import ExternalLauncher
from rl_conformance.launchers.plan import TargetPool
from rl_conformance.model.comparability import NOT_REACHED, PREFLIGHT_REFUSED

FRONT, RL, WEB, WORKER = "http://h:8000", "http://h:8001", "http://h:8080", "http://h:9090"
WORKERS = [{"instance_id": 7587886443219045121, "namespace": "dynamo", "routes": ["flush_cache"]}]


def answer(
    status: int, document: Any = None, content: bytes = b"", content_type: str = "application/json"
) -> httpx.Response:
    """A response as the client reads it (a stream, read once)."""
    data = json.dumps(document).encode() if document is not None else content
    headers = {"content-type": content_type} if data else {}
    return httpx.Response(status, headers=headers, stream=httpx.ByteStream(data))


def dynamo(
    workers: list[dict[str, Any]] | None = None, gateway: bool = False, listener_status: int = 200
) -> Callable[[httpx.Request], httpx.Response]:
    """Dynamo 1.6.1's frontend at FRONT and RL listener at RL (with `gateway`, also behind
    FRONT/rl, as an ingress routing by path would serve it); a plain web server at WEB."""

    def handle(request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        path = request.url.path
        if url.startswith(WEB):
            page = b"<html><body><h1>Error response</h1>File not found</body></html>"
            return answer(404, content=page, content_type="text/html")
        if url.startswith(RL) or (gateway and path.startswith("/rl/")):
            path = path.removeprefix("/rl")
            if path == "/v1/rl/workers":
                body = {"protocol_version": 1, "namespace": "dynamo", "workers": workers or []}
                return answer(listener_status, body)
            return answer(404)
        if url.startswith(WORKER):
            return answer(200, content=b"# no metrics\n", content_type="text/plain")
        if path == "/v1/models":
            return answer(200, {"object": "list", "data": [{"id": "toy"}]})
        if path == "/v1/completions":
            return answer(200, {"choices": [{"text": "a", "finish_reason": "length"}]})
        if path == "/health":
            return answer(200, {"status": "healthy", "instances": []})
        message = f"Route not found: {request.method} {path}"
        return answer(404, {"message": message, "type": "Not Found", "code": 404})

    return handle


def pool_of(
    frontend: str, rl_url: str | None, *, named: frozenset[int] = frozenset(), **more: Any
) -> tuple[TargetPool, Client]:
    worker_urls = tuple(more.pop("worker_urls", ()))
    client = Client(transport=httpx.MockTransport(dynamo(**more)))
    launcher = ExternalLauncher("vllm", frontend, rl_url=rl_url, worker_urls=worker_urls)
    return TargetPool(
        {launcher.target_id: launcher}, named_workers={launcher.target_id: named}
    ), client


def refused(frontend: str, rl_url: str | None, **more: Any) -> str:
    pool, client = pool_of(frontend, rl_url, **more)
    with pytest.raises(WrongInput) as raised:
        pool.get("external-vllm", client)
    target = pool.retired["external-vllm"]
    assert target.unreached_kind == PREFLIGHT_REFUSED
    assert target.frontend_url == frontend  # reported as given
    assert all(getattr(item, "check_id", "").startswith("input.") for item in raised.value.evidence)
    return str(raised.value).removeprefix("external-vllm: ")


def reached(frontend: str, rl_url: str | None, **more: Any) -> None:
    pool, client = pool_of(frontend, rl_url, **more)
    target = pool.get("external-vllm", client)
    assert target.unreached is None


def test_the_frontends_openai_base_url_as_the_rl_url() -> None:
    said = refused(FRONT, f"{FRONT}/v1")
    assert said.startswith(
        f"--rl-url {FRONT}/v1 is the frontend's OpenAI base URL, not the RL listener's (give the "
        "RL listener's own URL: DYN_RL_PORT, port 8001 by default): GET /v1/v1/rl/workers "
        "answered HTTP 404"
    )


def test_the_frontend_under_another_path_as_the_rl_url() -> None:
    said = refused(FRONT, f"{FRONT}/rl")
    assert said.startswith(f"--rl-url {FRONT}/rl is the frontend's address, not the RL listener")


def test_another_frontend_as_the_rl_url() -> None:
    other = refused(FRONT, "http://h2:8000")  # another name, answered as a frontend
    assert other.startswith("--rl-url http://h2:8000 is a frontend: it lists models")


def test_the_listener_with_a_path() -> None:
    said = refused(FRONT, f"{RL}/v1")
    assert said.startswith(
        f"--rl-url {RL}/v1 is the RL listener with a path (give --rl-url {RL}: the suite adds "
        "/v1/rl/workers itself): GET /v1/v1/rl/workers answered HTTP 404 (an empty body)"
    )


def test_the_frontend_with_a_path() -> None:
    said = refused(f"{FRONT}/v1", RL)
    assert said.startswith(
        f"--frontend {FRONT}/v1 is the frontend with a path (give --frontend {FRONT}: the suite "
        "adds /v1/... itself): GET /v1/v1/models answered HTTP 404"
    )


def test_the_listener_as_the_frontend_and_the_two_swapped() -> None:
    alone = refused(RL, None)
    assert alone.startswith(f"--frontend {RL} is Dynamo's RL listener, not its frontend (give")
    swapped = refused(RL, FRONT)
    assert swapped.startswith(
        f"--frontend {RL} is Dynamo's RL listener and --rl-url {FRONT} the frontend: they are "
        f"swapped (give --frontend {FRONT} --rl-url {RL}): GET /v1/models answered HTTP 404"
    )
    assert "; and " not in swapped  # one sentence, not one per flag


def test_a_web_server_that_is_not_a_dynamo_listener() -> None:
    said = refused(FRONT, WEB)
    assert said.startswith(f"--rl-url {WEB} is not Dynamo's RL listener (give the listener's URL")
    assert "an HTML page: 'Error response File not found'" in said


def test_a_worker_id_discovery_does_not_list_names_the_ids_it_lists() -> None:
    said = refused(FRONT, RL, workers=WORKERS, named=frozenset({7587886443219045112}))
    assert said == (
        "--worker 7587886443219045112 is not a worker of this deployment (give --worker with an "
        "id discovery lists, or --all-workers; did you mean --worker 7587886443219045121?): GET "
        f"{RL}/v1/rl/workers lists 7587886443219045121"
    )


def test_what_a_faithful_deployment_may_answer_is_never_a_mistake() -> None:
    reached(FRONT, f"{FRONT}/rl", gateway=True)  # one gateway, routing the listener by path
    reached(FRONT, RL, workers=WORKERS, named=frozenset({7587886443219045121}))
    reached(FRONT, RL, named=frozenset({5}))  # discovery lists no worker yet: nothing certain
    string_ids = [{"instance_id": "7587886443219045121", "namespace": "dynamo"}]
    reached(FRONT, RL, workers=string_ids, named=frozenset({5}))
    unnamed = dict(workers=WORKERS, named=frozenset({5}), worker_urls=(WORKER,))
    reached(FRONT, RL, **unnamed)  # a --worker-url whose metrics name no id: it may be that one
    reached(FRONT, RL, listener_status=503)  # a server error is the deployment's answer


def test_a_frontend_still_starting_is_not_reached_not_a_mistake() -> None:
    def empty(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return answer(200, {"object": "list", "data": []})
        return dynamo()(request)

    client = Client(transport=httpx.MockTransport(empty))
    launcher = ExternalLauncher("vllm", FRONT, rl_url=RL, model="toy")
    pool = TargetPool({launcher.target_id: launcher})
    with pytest.raises(LaunchError) as raised:
        pool.get("external-vllm", client)
    assert not isinstance(raised.value, WrongInput)
    assert "wait until it is listed" in str(raised.value)
    assert pool.retired["external-vllm"].unreached_kind == NOT_REACHED


def test_a_target_not_reached_runs_no_test_at_all() -> None:
    """A frontend that does not answer leaves every test of its target an error naming that one
    cause (never a suite's assertion about a model it could not resolve)."""

    def down(request: httpx.Request) -> httpx.Response:
        if str(request.url).startswith(FRONT):
            raise httpx.ConnectError("[Errno 111] Connection refused")
        return dynamo()(request)

    client = Client(transport=httpx.MockTransport(down))
    launcher = ExternalLauncher("vllm", FRONT, rl_url=RL)
    pool = TargetPool({launcher.target_id: launcher})
    for _ in range(2):
        with pytest.raises(LaunchError, match="the frontend did not answer: preflight GET"):
            pool.get("external-vllm", client)
    assert json.dumps(pool.retired["external-vllm"].describe())  # reported as given
    assert pool.retired["external-vllm"].unreached_kind == NOT_REACHED
