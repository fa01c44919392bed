"""The distributed-update and version-metadata faults manifest: each test shows the faulty and
the clean behaviour (registered with ``@shows`` for ``test_fake_faults``' completeness check)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fake_backend_helpers import admin, faulted, shows

from fake_backends.deployment.assembly import FakeDeployment

UPDATE = {"names": ["w"], "dtypes": ["bfloat16"], "shapes": [[2]], "weight_version": "d1"}


@pytest.fixture
def python_worker() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", workers=1) as deployment:
        yield deployment


@pytest.fixture
def sglang_worker() -> Iterator[FakeDeployment]:
    with FakeDeployment("sglang", workers=1) as deployment:
        yield deployment


def paused_with_group(client: httpx.Client, dep: FakeDeployment) -> str:
    base: str = dep.workers[0]["system_url"]
    admin(client, base, "pause_generation")
    admin(client, base, "init_weights_update_group", {"group_name": "g"})
    return base


def version(client: httpx.Client, base: str) -> object:
    return admin(client, base, "get_weight_version")["version"]


@shows("distributed_update_without_group")
def test_distributed_update_without_group(
    client: httpx.Client, python_worker: FakeDeployment
) -> None:
    base = python_worker.workers[0]["system_url"]
    admin(client, base, "pause_generation")
    refused = admin(client, base, "update_weights_from_distributed", UPDATE)
    assert refused["status"] == "error" and version(client, base) is None
    with faulted(python_worker, "distributed_update_without_group"):
        assert admin(client, base, "update_weights_from_distributed", UPDATE)["status"] == "ok"
    assert version(client, base) == "d1"
    admin(client, base, "resume_generation")


@shows("distributed_version_not_declared")
def test_distributed_version_not_declared(
    client: httpx.Client, python_worker: FakeDeployment, sglang_worker: FakeDeployment
) -> None:
    base = paused_with_group(client, python_worker)
    with faulted(python_worker, "distributed_version_not_declared"):
        assert admin(client, base, "update_weights_from_distributed", UPDATE)["status"] == "ok"
    assert version(client, base) is None
    assert admin(client, base, "update_weights_from_distributed", UPDATE)["status"] == "ok"
    assert version(client, base) == "d1"
    admin(client, base, "resume_generation")
    system = sglang_worker.workers[0]["system_url"]
    with faulted(sglang_worker, "distributed_version_not_declared"):
        admin(client, system, "control/update_weights_from_distributed", UPDATE)
    assert served_version(client, sglang_worker) != "d1"
    admin(client, system, "control/update_weights_from_distributed", UPDATE)
    assert served_version(client, sglang_worker) == "d1"


def served_version(client: httpx.Client, dep: FakeDeployment) -> object:
    nvext = {"backend_instance_id": dep.workers[0]["instance_id"], "extra_fields": ["engine_data"]}
    body = {"model": "toy", "prompt": [5, 6, 7], "max_tokens": 2, "nvext": nvext}
    reply = client.post(f"{dep.frontend_url}/v1/completions", json=body).json()
    return reply["nvext"]["engine_data"].get("weight_version")


@shows("distributed_update_fails_open")
def test_distributed_update_fails_open(
    client: httpx.Client, python_worker: FakeDeployment, sglang_worker: FakeDeployment
) -> None:
    base = paused_with_group(client, python_worker)
    malformed = {**UPDATE, "reset_prefix_cache": "yes"}
    assert admin(client, base, "update_weights_from_distributed", malformed) == {
        "status": "error",
        "message": "'reset_prefix_cache' must be a boolean",
    }
    with faulted(python_worker, "distributed_update_fails_open"):
        opened = admin(client, base, "update_weights_from_distributed", malformed)
    assert opened["status"] == "ok" and version(client, base) is None
    admin(client, base, "resume_generation")
    system = sglang_worker.workers[0]["system_url"]
    nameless = {key: value for key, value in UPDATE.items() if key != "names"}
    route = f"{system}/engine/control/update_weights_from_distributed"
    assert client.post(route, json=nameless).status_code == 500
    with faulted(sglang_worker, "distributed_update_fails_open"):
        assert client.post(route, json=nameless).json()["success"] is True


@shows("version_update_fails_open")
def test_version_update_fails_open(client: httpx.Client, sglang_worker: FakeDeployment) -> None:
    route = f"{sglang_worker.workers[0]['system_url']}/engine/control/update_weight_version"
    assert client.post(route, json={}).status_code == 500
    with faulted(sglang_worker, "version_update_fails_open"):
        assert client.post(route, json={}).json()["success"] is True
    with FakeDeployment("vllm", workers=1, admin_family="sidecar") as sidecar:
        route = f"{sidecar.workers[0]['system_url']}/engine/update/update_weight_version"
        assert client.post(route, json={}).status_code == 500
        with faulted(sidecar, "version_update_fails_open"):
            assert client.post(route, json={}).json()["success"] is True
