"""When a target is first reached, the versions its deployment publishes are read once, read-only,
each kept with its source; what it does not publish, or a plane that does not answer, records
nothing and fails nothing (`plan.record_versions`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rl_conformance.client.http import Client
from rl_conformance.launchers import plan
from rl_conformance.model.target import Target

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "dynamo-1.6.1" / "mocker"
OPENAPI = json.loads((RECORDED / "frontend_openapi.json").read_text())["response"]["body"]
MODELS = json.loads((RECORDED / "models.json").read_text())["response"]["body"]
FRONTEND_METRICS = json.loads((RECORDED / "frontend_metrics_series.json").read_text())["response"][
    "text"
]
WORKER_METRICS = 'vllm:build_info{version="0.11.0",engine="0"} 1\n'

Handler = Callable[[httpx.Request], httpx.Response]


def reply(status: int, *, document: Any = None, text: str = "") -> httpx.Response:
    """A response whose body the client may stream (as a server's)."""
    body = json.dumps(document).encode() if document is not None else text.encode()
    return httpx.Response(status, stream=httpx.ByteStream(body))


def deployment(seen: list[str]) -> Handler:
    """A Dynamo-shaped deployment: the frontend at http://f, workers at http://w<n>."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url}")
        url = str(request.url)
        if request.method == "POST" and url == "http://f/v1/completions":
            return reply(200, document={"system_fingerprint": "vllm-0.11.0-tp2-1a2b3c4d"})
        if request.method != "GET":
            return reply(405)
        routes: dict[str, httpx.Response] = {
            "http://f/openapi.json": reply(200, document=OPENAPI),
            "http://f/v1/models": reply(200, document=MODELS),
            "http://f/metrics": reply(200, text=FRONTEND_METRICS),
            "http://w2/metrics": reply(500, text="boom"),
        }
        if url.startswith("http://w") and url.endswith("/metrics") and url not in routes:
            return reply(200, text=WORKER_METRICS)
        return routes.get(url, reply(404, document={"message": "Route not found"}))

    return handle


@pytest.fixture
def seen() -> list[str]:
    return []


@pytest.fixture
def client(seen: list[str]) -> Iterator[Client]:
    with Client(transport=httpx.MockTransport(deployment(seen)), deadline_s=5) as made:
        yield made


def target(**changes: Any) -> Target:
    fields: dict[str, Any] = {
        "id": "external-vllm",
        "backend": "vllm",
        "kind": "external",
        "frontend_url": "http://f",
        "model": "toy",
    }
    return Target(**{**fields, **changes})


def test_every_published_version_is_recorded_with_where_it_was_read(
    client: Client, seen: list[str]
) -> None:
    reached = target(worker_urls=("http://w3/",))
    plan.preflight_generation(reached, client)
    plan.record_versions(
        reached, client, [{"system_url": "http://w1"}, {"system_url": "http://w2"}]
    )
    assert reached.versions == {
        "vllm": "0.11.0",
        "dynamo": "1.6.1",
        "model.owned_by": "nvidia",
        "worker.vllm:build_info.version": "0.11.0",
    }
    sources = reached.version_sources
    assert sources["vllm"] == (
        'frontend POST /v1/completions system_fingerprint "vllm-0.11.0-tp2-1a2b3c4d"'
    )
    assert sources["dynamo"].startswith("frontend GET /openapi.json info.version")
    assert sources["worker.vllm:build_info.version"] == (
        "worker system server http://w1, http://w3 GET /metrics vllm:build_info{version}"
    )
    assert all(line.startswith("GET") for line in seen[1:]), seen  # read-only after the token


def test_a_deployment_that_publishes_nothing_gets_nothing_recorded(seen: list[str]) -> None:
    def nothing(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.method == "POST":
            return reply(200, document={"system_fingerprint": None, "choices": []})
        return reply(404)

    reached = target(versions={"ai-dynamo": "1.6.1"}, version_sources={"ai-dynamo": "launcher"})
    with Client(transport=httpx.MockTransport(nothing), deadline_s=5) as quiet:
        plan.preflight_generation(reached, quiet)
        plan.record_versions(reached, quiet, [{"system_url": "http://w1"}])
    assert reached.versions == {"ai-dynamo": "1.6.1"}
    assert reached.version_sources == {"ai-dynamo": "launcher"}
    assert "http://w1/metrics" in seen and reached.notes == []


def test_planes_that_do_not_answer_record_nothing_and_raise_nothing() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    reached = target()
    with Client(transport=httpx.MockTransport(down), deadline_s=5) as broken:
        plan.record_versions(reached, broken, [{"system_url": "http://w1"}, {"system_url": 7}])
    assert reached.versions == {} and reached.version_sources == {}


def test_bodies_that_are_not_what_they_should_be_record_nothing(seen: list[str]) -> None:
    def garbage(request: httpx.Request) -> httpx.Response:
        return reply(200, text='{"info": {"version": [1]}, "data": 3} not json {')

    reached = target()
    with Client(transport=httpx.MockTransport(garbage), deadline_s=5) as odd:
        plan.record_versions(reached, odd, [])
    assert reached.versions == {}


def test_a_large_fleet_reads_only_the_first_workers(client: Client, seen: list[str]) -> None:
    workers = [{"system_url": f"http://w{n + 10}"} for n in range(50)]
    plan.record_versions(target(), client, workers)
    scraped = [line for line in seen if "//w" in line]
    assert len(scraped) == plan.VERSION_WORKERS


def test_the_launchers_versions_are_marked_as_the_launchers(client: Client) -> None:
    class Launched:
        target_id = "dynamo-fake-vllm"
        backend = "vllm"

        def start(self) -> Target:
            return target(versions={"ai-dynamo": "1.6.1"}, kind="dynamo", id=self.target_id)

        def stop(self) -> None:
            return None

    pool = plan.TargetPool({"dynamo-fake-vllm": Launched()})
    reached = pool.get("dynamo-fake-vllm", client)
    assert reached.version_sources["ai-dynamo"] == plan.LAUNCHER_SOURCE
    assert reached.versions["ai-dynamo"] == "1.6.1" and reached.versions["dynamo"] == "1.6.1"


def test_the_release_a_deployment_publishes_is_its_release_marked_observed(client: Client) -> None:
    reached = target()  # a URL target without --dynamo-release: not known until observed
    assert (reached.release, reached.release_source) == ("main", "unknown")
    plan.record_versions(reached, client, [])
    assert (reached.release, reached.release_source) == ("1.6.1", "observed")
    described = reached.describe()
    assert described["dynamo_release"] == "1.6.1"
    assert described["dynamo_release_source"] == "observed"


def test_an_observed_release_wins_over_a_declared_one_and_the_notes_say_so(
    client: Client,
) -> None:
    reached = target(release="main", release_source="--dynamo-release")
    plan.record_versions(reached, client, [])
    assert (reached.release, reached.release_source) == ("1.6.1", "observed")
    assert any("--dynamo-release main was declared" in note for note in reached.notes)


def test_a_release_nothing_publishes_stays_declared_or_unknown() -> None:
    def nothing(request: httpx.Request) -> httpx.Response:
        return reply(404)

    declared = target(release="1.6.1", release_source="--dynamo-release")
    unknown = target()
    with Client(transport=httpx.MockTransport(nothing), deadline_s=5) as quiet:
        plan.record_versions(declared, quiet, [])
        plan.record_versions(unknown, quiet, [])
    assert (declared.release, declared.release_source) == ("1.6.1", "--dynamo-release")
    assert (unknown.release, unknown.release_source) == ("main", "unknown")


def test_the_external_launcher_says_whether_the_release_was_declared() -> None:
    from rl_conformance.launchers import ExternalLauncher

    given = ExternalLauncher("vllm", "http://f", release="1.6.1").start()
    assert (given.release, given.release_source) == ("1.6.1", "--dynamo-release")
    default = ExternalLauncher("vllm", "http://f").start()
    assert (default.release, default.release_source) == ("main", "unknown")
