"""Workers as a user reaching a deployment by URL knows them: discovery, plus --worker-url with
the identity each worker's own metrics tell."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fake_backends.deployment.assembly import FakeDeployment
from rl_conformance.client.http import Client
from rl_conformance.control.fleet import generate_counters, resolve_workers
from rl_conformance.model.target import Target


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with Client(deadline_s=10) as http:
        yield http


def test_given_worker_urls_learn_their_identity_from_their_metrics(client: Client) -> None:
    with FakeDeployment("sglang", workers=2) as fleet:
        urls = tuple(worker["system_url"] for worker in fleet.workers)
        target = Target(
            "t", "sglang", "external", fleet.frontend_url, fleet.rl_url, "toy", worker_urls=urls
        )
        found = resolve_workers(client, target)
    assert [w.system_url for w in found] == list(urls)
    assert [w.instance_id for w in found] == [w["instance_id"] for w in fleet.workers]
    assert all(w.routes is None for w in found)


def test_discovered_workers_are_not_listed_twice(client: Client) -> None:
    with FakeDeployment("vllm", workers=2) as fleet:
        urls = (fleet.workers[0]["system_url"] + "/",)
        target = Target(
            "t", "vllm", "external", fleet.frontend_url, fleet.rl_url, "toy", worker_urls=urls
        )
        found = resolve_workers(client, target)
    assert len(found) == 2 and all(w.routes is not None for w in found)


def test_a_worker_url_without_metrics_keeps_an_unknown_identity(client: Client) -> None:
    with FakeDeployment("sglang", workers=1) as fleet:
        target = Target(
            "t",
            "sglang",
            "external",
            fleet.frontend_url,
            None,
            "toy",
            worker_urls=(fleet.frontend_url + "/not-a-system-server",),
        )
        (worker,) = resolve_workers(client, target)
        assert worker.instance_id is None
        assert generate_counters(client, [worker]) is None
