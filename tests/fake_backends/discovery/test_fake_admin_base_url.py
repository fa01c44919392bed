"""`--admin-base-url`: every listed worker carries `world_size` and an `admin_base_url` apart
from its `system_url`, in the shape Dynamo 1.6.1 lists a tensor-parallel worker with
(fixtures/dynamo-1.6.1/vllm-sidecar/variant_tp2_world_size2__rl_workers.json); a departed
worker drops both, as every probe failure does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from fake_backends import FakeDeployment

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
RECORDED = FIXTURES / "dynamo-1.6.1/vllm-sidecar/variant_tp2_world_size2__rl_workers.json"


def listed(fleet: FakeDeployment) -> list[dict[str, Any]]:
    reply = httpx.get(fleet.rl_url + "/v1/rl/workers", timeout=10, trust_env=False)
    workers: list[dict[str, Any]] = reply.json()["workers"]
    return workers


def test_workers_are_listed_in_the_recorded_sharded_shape() -> None:
    (recorded,) = json.loads(RECORDED.read_text())["response"]["body"]["workers"]
    with FakeDeployment("vllm", workers=2, admin_base_urls=True) as fleet:
        workers = listed(fleet)
    assert len(workers) == 2
    for worker in workers:
        assert set(worker) == set(recorded)
        assert worker["world_size"] == recorded["world_size"]
        assert worker["admin_base_url"].rstrip("/") != worker["system_url"]


def test_a_departed_worker_lists_no_admin_base_url() -> None:
    with FakeDeployment("vllm", workers=1, admin_base_urls=True) as fleet:
        fleet.state.workers[0].runtime.departed = True
        (worker,) = listed(fleet)
    assert worker["routes"] == [] and "error" in worker
    assert not {"admin_base_url", "world_size", "system_url"} & set(worker)
