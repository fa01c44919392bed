"""The fake native sidecar's weight-transfer gauge (vLLM's
`vllm:rl_weight_update_operations_in_flight`): absent until a transfer step ran, back to 0 after
each step whether it succeeded or was refused, and stuck at 1 after a refused step under
``weight_update_gauge_stuck``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fake_backend_helpers import shows

from fake_backends.deployment.assembly import FakeDeployment
from rl_conformance.checks.weight_gauge import in_flight
from rl_conformance.wire import prometheus


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def gauge(client: httpx.Client, base: str) -> dict[str, float] | None:
    return in_flight(prometheus.parse(client.get(f"{base}/metrics").text))


def step(client: httpx.Client, base: str, route: str, body: dict[str, object]) -> int:
    return client.post(f"{base}/engine/{route}", json=body).status_code


def test_the_gauge_appears_with_the_first_step_and_settles_at_zero(client: httpx.Client) -> None:
    with FakeDeployment("vllm", admin_family="sidecar") as dep:
        base = dep.workers[0]["system_url"]
        assert gauge(client, base) is None
        step(client, base, "update/start_weight_update", {})
        step(client, base, "update/update_weights", {"update_info": {"names": ["w"]}})
        step(client, base, "update/finish_weight_update", {"weight_version": "v1"})
        step(client, base, "update/update_weights", {"update_info": {"names": ["w"]}})  # refused
        assert gauge(client, base) == {"finish": 0, "start": 0, "update": 0}


@shows("weight_update_gauge_stuck")
def test_weight_update_gauge_stuck(client: httpx.Client) -> None:
    faults = ["weight_update_gauge_stuck"]
    with FakeDeployment("vllm", admin_family="sidecar", faults=faults) as dep:
        base = dep.workers[0]["system_url"]
        assert step(client, base, "update/update_weights", {"update_info": {}}) != 200
        assert gauge(client, base) == {"update": 1}
