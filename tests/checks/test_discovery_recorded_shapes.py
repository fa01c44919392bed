"""Dynamo 1.6.1's own discovery bodies pass every discovery rule, its unusual shapes included
(fixtures/dynamo-1.6.1: a listed worker whose probe failed, with `routes: []` and `error`; a
worker with `world_size` and an `admin_base_url` apart from its `system_url`, as
`RlWorkerInfo` in ai-dynamo/dynamo lib/rl/src/lib.rs serialises them), and the suite reads them
as the contract says: an errored worker is not administered, and a worker is administered at its
`system_url`, never at its `admin_base_url` (transfer metadata). The same bodies broken in
exactly one rule still fail that rule."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rl_conformance.checks import discovery, schema_check
from rl_conformance.checks.base import CheckResult
from rl_conformance.client.breaker import CircuitBreaker
from rl_conformance.client.http import Client
from rl_conformance.control.fleet import discovered_workers
from rl_conformance.model.target import Target

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "dynamo-1.6.1"
PROBE_FAILED = ROOT / "toy-worker" / "worker_gone_rl_workers.json"
SEPARATE_ADMIN_URL = ROOT / "vllm-sidecar" / "variant_tp2_world_size2__rl_workers.json"
RULES: dict[str, Callable[[Any], CheckResult]] = {
    "discovery.protocol_version": discovery.protocol_version,
    "discovery.dynamo_listener": discovery.dynamo_listener,
    "discovery.routes_well_formed": discovery.routes_well_formed,
    "discovery.request_plane_url": discovery.request_plane_url,
    "discovery.instance_ids": discovery.instance_ids,
    "discovery.optional_fields": discovery.optional_fields,
    "discovery.error_fails_closed": discovery.error_fails_closed,
    "discovery-v1": lambda body: schema_check("discovery-v1", body),
}


def recorded_bodies() -> dict[str, Any]:
    bodies = {}
    for path in sorted(ROOT.glob("*/*.json")):
        fixture = json.loads(path.read_text())
        request, response = fixture["request"], fixture["response"]
        if request["url_path"] == "/v1/rl/workers" and response["status"] == 200:
            bodies[f"{path.parent.name}/{path.stem}"] = response["body"]
    return bodies


BODIES = recorded_bodies()


def body_of(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(path.read_text())["response"]["body"]
    return body


def test_the_unusual_recorded_shapes_are_among_those_judged() -> None:
    (gone,) = body_of(PROBE_FAILED)["workers"]
    assert gone["routes"] == [] and "error" in gone and "system_url" not in gone
    (sharded,) = body_of(SEPARATE_ADMIN_URL)["workers"]
    assert sharded["world_size"] == 2
    assert sharded["admin_base_url"].rstrip("/") != sharded["system_url"]
    assert {PROBE_FAILED.stem, SEPARATE_ADMIN_URL.stem} <= {key.split("/")[1] for key in BODIES}


@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize("name", sorted(BODIES))
def test_every_recorded_discovery_body_passes_every_rule(name: str, rule: str) -> None:
    result = RULES[rule](BODIES[name])
    assert result.passed, result.explain()


def test_every_recorded_discovery_body_is_stable_against_itself() -> None:
    for name, body in BODIES.items():
        result = discovery.identity_stable(body, copy.deepcopy(body))
        assert result.passed, (name, result.explain())


def broken(path: Path, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = copy.deepcopy(body_of(path))
    change(body["workers"][0])
    return body


@pytest.mark.parametrize(
    ("path", "change", "rule"),
    [
        (PROBE_FAILED, lambda w: w.update(routes=["pause_generation"]), "error_fails_closed"),
        (PROBE_FAILED, lambda w: w.update(system_url="http://127.0.0.1:1"), "error_fails_closed"),
        (PROBE_FAILED, lambda w: w.update(world_size=2), "error_fails_closed"),
        (SEPARATE_ADMIN_URL, lambda w: w["routes"].reverse(), "routes_well_formed"),
        (SEPARATE_ADMIN_URL, lambda w: w.update(world_size=None), "optional_fields"),
    ],
    ids=["error-with-routes", "error-with-system-url", "error-with-world-size", "unsorted", "null"],
)
def test_the_recorded_shapes_broken_in_one_rule_fail_it(
    path: Path, change: Callable[[dict[str, Any]], None], rule: str
) -> None:
    result = getattr(discovery, rule)(broken(path, change))
    assert not result.passed


def test_admin_base_url_without_world_size_fails_the_schema() -> None:
    body = broken(SEPARATE_ADMIN_URL, lambda w: w.pop("world_size"))
    assert not schema_check("discovery-v1", body).passed


def listed(body: dict[str, Any]) -> list[tuple[Any, str | None, tuple[str, ...] | None]]:
    """The workers the suite administers, read from a listener answering `body`."""

    def content() -> Iterator[bytes]:
        yield json.dumps(body).encode()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=content())

    target = Target("recorded", "vllm", "external", "http://frontend.test", "http://rl.test")
    transport = httpx.MockTransport(answer)
    with Client(transport=transport, breaker=CircuitBreaker(threshold=0)) as client:
        workers = discovered_workers(client, target)
    return [(worker.instance_id, worker.system_url, worker.routes) for worker in workers]


def test_a_worker_whose_probe_failed_is_listed_but_not_administered() -> None:
    assert listed(body_of(PROBE_FAILED)) == []


def test_a_worker_is_administered_at_its_system_url_not_its_admin_base_url() -> None:
    body = body_of(SEPARATE_ADMIN_URL)
    (worker,) = body["workers"]
    assert listed(body) == [(worker["instance_id"], worker["system_url"], tuple(worker["routes"]))]
