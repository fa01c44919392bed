"""The RL listener's listing order, a deployment option (not a fault: the contract lets a listener
list its workers in any order, "never interpret list position as worker identity"): `sorted` as
the real listener, or the same workers `rotated` or `shuffled` anew on every read."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_backends import READY_FIELDS, read_ready_line
from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.discovery.listener import LISTING_ORDERS

REPO = Path(__file__).resolve().parents[3]
READS = 8


def listings(client: httpx.Client, rl_url: str, reads: int = READS) -> list[list[dict[str, Any]]]:
    return [client.get(f"{rl_url}/v1/rl/workers").json()["workers"] for _ in range(reads)]


def by_identity(workers: list[dict[str, Any]]) -> dict[int, str]:
    return {worker["instance_id"]: json.dumps(worker, sort_keys=True) for worker in workers}


def order(workers: list[dict[str, Any]]) -> list[int]:
    return [worker["instance_id"] for worker in workers]


@pytest.mark.parametrize("listing_order", ["rotated", "shuffled"])
@pytest.mark.parametrize("workers", [2, 4])
def test_every_read_lists_the_same_workers_in_another_order(
    client: httpx.Client, listing_order: str, workers: int
) -> None:
    with FakeDeployment("vllm", workers=workers, listing_order=listing_order) as fleet:
        reads = listings(client, fleet.rl_url)
        identities = {worker["instance_id"] for worker in fleet.workers}
    first = by_identity(reads[0])
    assert set(first) == identities
    for read in reads:
        assert by_identity(read) == first  # the same entries, field for field
    for before, after in itertools.pairwise(reads):
        assert order(before) != order(after)
    sorted_keys = sorted(identities)
    assert any(order(read) != sorted_keys for read in reads)
    assert len({tuple(order(read)) for read in reads}) >= 2


def test_the_default_order_is_the_real_listeners_sorted_one(client: httpx.Client) -> None:
    with FakeDeployment("vllm", workers=3) as fleet:
        reads = listings(client, fleet.rl_url, reads=3)
    for read in reads:
        assert order(read) == sorted(order(read))


def test_rotation_of_one_worker_is_that_worker(client: httpx.Client) -> None:
    with FakeDeployment("vllm", workers=1, listing_order="rotated") as fleet:
        reads = listings(client, fleet.rl_url, reads=3)
    assert all(len(read) == 1 and read == reads[0] for read in reads)


def test_an_unknown_order_is_refused_before_anything_is_bound() -> None:
    with pytest.raises(ValueError, match="unknown listing order 'backwards'"):
        FakeDeployment("vllm", listing_order="backwards")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def test_the_command_line_option_reorders_and_keeps_the_ready_line(client: httpx.Client) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fake_backends", "vllm", "--rl-worker-order", "rotated"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        info = read_ready_line(proc.stdout, timeout=20)
        assert list(info) == list(READY_FIELDS)
        reads = listings(client, info["rl"], reads=3)
        assert [order(read) for read in reads[:2]] == [
            [w["instance_id"] for w in info["workers"]],
            [w["instance_id"] for w in reversed(info["workers"])],
        ]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_command_line_refuses_an_unknown_order() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "fake_backends", "vllm", "--rl-worker-order", "backwards"],
        capture_output=True,
        env=_env(),
        cwd=REPO,
    )
    assert out.returncode == 2 and out.stdout == b""
    assert all(name in out.stderr.decode() for name in LISTING_ORDERS)
