"""The discovery faults of the catalogue (`/v1/rl/workers`): protocol version 2, the gateway's body,
worker zero without routes or with a mismatched or failed probe, duplicate, rounded or unstable
instance ids, and route lists unsorted or duplicated."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from fake_backend_helpers import (
    faulted,
    rl_workers,
    shows,
)

from fake_backends.deployment.assembly import FakeDeployment


def _by_id(body: dict[str, Any], instance_id: int) -> list[dict[str, Any]]:
    return [w for w in body["workers"] if w["instance_id"] == instance_id]


@shows("protocol_version_2")
def test_protocol_version_2(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "protocol_version_2"):
        assert rl_workers(client, vllm)["protocol_version"] == 2


@shows("rl_listener_gateway_body")
def test_rl_listener_gateway_body(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "rl_listener_gateway_body"):
        body = rl_workers(client, vllm)
    assert body["protocol_version"] == 1 and body["total"] == 2 and "namespace" not in body
    assert all(
        {"id", "url", "engine"} <= set(w) and "instance_id" not in w for w in body["workers"]
    )


@shows(
    "worker_without_routes",
    "request_plane_url_mismatch",
    "probe_error_with_routes",
    "optional_field_null",
)
def test_worker_zero_faults(client: httpx.Client, vllm: FakeDeployment) -> None:
    first, second = (w["instance_id"] for w in vllm.workers)
    expectations: dict[str, Callable[[dict[str, Any]], bool]] = {
        "worker_without_routes": lambda w: "routes" not in w,
        "request_plane_url_mismatch": lambda w: (
            w["request_plane_url"] == "dyn://dynamo.backend.generate"
        ),
        "probe_error_with_routes": lambda w: (
            isinstance(w.get("error"), str) and len(w["routes"]) > 0
        ),
        "optional_field_null": lambda w: "system_url" in w and w["system_url"] is None,
    }
    for fault, broken in expectations.items():
        with faulted(vllm, fault):
            body = rl_workers(client, vllm)
        (zero,) = _by_id(body, first)
        (one,) = _by_id(body, second)
        assert broken(zero), fault
        assert not broken(one), fault


@shows("duplicate_instance_ids")
def test_duplicate_instance_ids(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "duplicate_instance_ids"):
        body = rl_workers(client, vllm)
    assert len(_by_id(body, vllm.workers[0]["instance_id"])) == 2


@shows("routes_unsorted", "routes_duplicated")
def test_route_list_faults(client: httpx.Client, vllm: FakeDeployment) -> None:
    with faulted(vllm, "routes_unsorted"):
        unsorted = rl_workers(client, vllm)["workers"][0]["routes"]
    with faulted(vllm, "routes_duplicated"):
        duplicated = rl_workers(client, vllm)["workers"][0]["routes"]
    assert unsorted != sorted(unsorted) and len(set(unsorted)) == len(unsorted)
    assert duplicated == sorted(duplicated) and len(set(duplicated)) < len(duplicated)


@shows("instance_id_rounded")
def test_instance_id_rounded(client: httpx.Client, vllm: FakeDeployment) -> None:
    exact = vllm.workers[0]["instance_id"]
    with faulted(vllm, "instance_id_rounded"):
        raw = client.get(f"{vllm.rl_url}/v1/rl/workers").text
    assert str(exact) not in raw and "7.587886443219045e+18" in raw
    values = [w["instance_id"] for w in json.loads(raw)["workers"]]
    assert all(isinstance(v, float) for v in values) and float(exact) in values


@shows("worker_identity_unstable")
def test_worker_identity_unstable(client: httpx.Client, vllm: FakeDeployment) -> None:
    stable = {w["instance_id"] for w in vllm.workers}
    assert {w["instance_id"] for w in rl_workers(client, vllm)["workers"]} == stable
    with faulted(vllm, "worker_identity_unstable"):
        first = {w["instance_id"] for w in rl_workers(client, vllm)["workers"]}
        second = {w["instance_id"] for w in rl_workers(client, vllm)["workers"]}
    assert first != stable and second != stable and first != second
    assert len(first) == len(second) == 2
