"""The RL listener's route probes: the faithful listener refuses a malformed reply, surfaces a
worker's own error and keeps its deadline; each probe fault breaks exactly one of these.

The ``@shows`` registry is shared with ``test_fake_faults``, whose completeness check imports
this module.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_backend_helpers import faulted, rl_workers, shows

from fake_backends.deployment.assembly import FakeDeployment


@pytest.fixture
def dep() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm") as deployment:
        yield deployment


def _reply(client: httpx.Client, dep: FakeDeployment, body: dict[str, Any]) -> int:
    answer = client.post(f"{dep.control_url}/probe_reply", json=body).json()
    return int(answer["instance_id"])


def _entry(client: httpx.Client, dep: FakeDeployment, instance_id: int) -> dict[str, Any]:
    found = [w for w in rl_workers(client, dep)["workers"] if w["instance_id"] == instance_id]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize(
    "reply",
    [
        {"status": "ok"},
        {"routes": ["a", 7]},
        {"routes": ["a", ""]},
        {"routes": [], "world_size": 0},
        {"routes": [], "world_size": True},
        {"routes": [], "admin_base_url": "http://worker:8120"},
        {"routes": [], "admin_base_url": "http://user:pw@worker:8120", "world_size": 1},
        "routes",
    ],
)
def test_a_refused_reply_is_listed_with_routes_empty_and_an_error(
    client: httpx.Client, dep: FakeDeployment, reply: Any
) -> None:
    instance_id = _reply(client, dep, {"reply": reply})
    entry = _entry(client, dep, instance_id)
    assert entry["routes"] == [] and entry["error"].startswith("worker routes response")
    assert not {"system_url", "world_size", "admin_base_url"} & set(entry)


def test_a_valid_reply_is_listed_sorted_and_unique(
    client: httpx.Client, dep: FakeDeployment
) -> None:
    reply = {"routes": ["b", "a", "a"], "admin_base_url": " http://w:8120 ", "world_size": 4}
    entry = _entry(client, dep, _reply(client, dep, {"reply": reply}))
    assert entry["routes"] == ["a", "b"] and entry["world_size"] == 4 and "error" not in entry
    assert entry["admin_base_url"] == "http://w:8120"
    _reply(client, dep, {})
    assert "error" not in _entry(client, dep, instance_id=dep.workers[-1]["instance_id"])


@shows("probe_reply_unvalidated")
def test_probe_reply_unvalidated(client: httpx.Client, dep: FakeDeployment) -> None:
    instance_id = _reply(client, dep, {"reply": {"routes": ["a"], "world_size": 0}})
    assert _entry(client, dep, instance_id)["error"]
    with faulted(dep, "probe_reply_unvalidated"):
        entry = _entry(client, dep, instance_id)
    assert entry["world_size"] == 0 and "error" not in entry


@shows("probe_worker_error_replaced")
def test_probe_worker_error_replaced(client: httpx.Client, dep: FakeDeployment) -> None:
    instance_id = _reply(client, dep, {"reply": {"status": "error", "message": "engine is dead"}})
    assert _entry(client, dep, instance_id)["error"] == "engine is dead"
    with faulted(dep, "probe_worker_error_replaced"):
        assert _entry(client, dep, instance_id)["error"] == "worker routes request failed"


def _hung_read(client: httpx.Client, dep: FakeDeployment) -> tuple[list[dict[str, Any]], float]:
    client.post(
        f"{dep.control_url}/listener_env", json={"env": {"DYN_RL_REQUEST_TIMEOUT_SECS": "1"}}
    )
    _reply(client, dep, {"hang": True})
    started = time.monotonic()
    workers = rl_workers(client, dep)["workers"]
    return workers, time.monotonic() - started


def test_a_hung_worker_is_listed_with_the_timeout_within_the_deadline(
    client: httpx.Client, dep: FakeDeployment
) -> None:
    workers, elapsed = _hung_read(client, dep)
    hung = dep.workers[-1]["instance_id"]
    assert elapsed < 5
    for worker in workers:
        if worker["instance_id"] == hung:
            assert worker["error"] == "worker discovery timed out after 1s"
            assert worker["routes"] == []
        else:
            assert "error" not in worker and worker["routes"]


@shows("probe_deadline_ignored")
def test_probe_deadline_ignored(client: httpx.Client, dep: FakeDeployment) -> None:
    with faulted(dep, "probe_deadline_ignored"):
        with pytest.raises(httpx.ReadTimeout):
            client.post(
                f"{dep.control_url}/listener_env",
                json={"env": {"DYN_RL_REQUEST_TIMEOUT_SECS": "1"}},
            )
            _reply(client, dep, {"hang": True})
            client.get(f"{dep.rl_url}/v1/rl/workers", timeout=3)
        _reply(client, dep, {})


@shows("probe_timeout_fails_all")
def test_probe_timeout_fails_all(client: httpx.Client, dep: FakeDeployment) -> None:
    with faulted(dep, "probe_timeout_fails_all"):
        workers, _ = _hung_read(client, dep)
    assert len(workers) == 2
    assert all(w["error"] == "worker discovery timed out after 1s" for w in workers)
