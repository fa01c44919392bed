"""`--require-header` / `--require-query PLANE=...`: an authenticating ingress in front of a plane
of a fake deployment answers 401 (vLLM's body) to a request without the credentials, and serves
one that has them; the fault control port is never guarded."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from fake_backends import FakeDeployment
from fake_backends.__main__ import main
from fake_backends.deployment.credentials import RequiredCredentials

TOKEN = "Bearer fake-required-token"


@pytest.fixture(scope="module")
def guarded() -> Iterator[FakeDeployment]:
    required = RequiredCredentials.parse(
        [f"frontend=Authorization: {TOKEN}", f"system=X-Admin: {TOKEN}"],
        ["rl=key=listener-key"],
    )
    with FakeDeployment("vllm", workers=1, credentials=required) as fleet:
        yield fleet


def get(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    with httpx.Client(trust_env=False, timeout=30) as http:
        return http.get(url, headers=headers or {})


def test_each_plane_refuses_a_request_without_its_credentials(guarded: FakeDeployment) -> None:
    system_url = guarded.workers[0]["system_url"]
    for url in (
        f"{guarded.frontend_url}/v1/models",
        f"{guarded.frontend_url}/health",
        f"{guarded.rl_url}/v1/rl/workers",
        f"{system_url}/health",
    ):
        refused = get(url)
        assert refused.status_code == 401, url
        assert refused.json() == {"error": "Unauthorized"}
        assert refused.headers["www-authenticate"] == "Bearer"
    assert (
        get(f"{guarded.frontend_url}/v1/models", {"Authorization": "Bearer other"}).status_code
        == 401
    )


def test_each_plane_serves_a_request_with_its_credentials(guarded: FakeDeployment) -> None:
    system_url = guarded.workers[0]["system_url"]
    assert get(f"{guarded.frontend_url}/v1/models", {"Authorization": TOKEN}).status_code == 200
    assert get(f"{guarded.rl_url}/v1/rl/workers?key=listener-key").status_code == 200
    assert get(f"{system_url}/health", {"X-Admin": TOKEN}).status_code == 200
    assert get(f"{guarded.rl_url}/v1/rl/workers", {"Authorization": TOKEN}).status_code == 401


def test_the_control_port_is_never_guarded(guarded: FakeDeployment) -> None:
    assert get(f"{guarded.control_url}/faults").status_code == 200


@pytest.mark.parametrize(
    "argv",
    [
        ["vllm", "--require-header", "nowhere=Authorization: x"],
        ["vllm", "--require-header", "frontend=Authorization"],
        ["vllm", "--require-query", "rl=key"],
    ],
)
def test_a_requirement_it_cannot_read_exits_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
