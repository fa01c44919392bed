"""Faults that only show from the second refit on: each test refits a fresh worker three times
and shows the first refit behave and a later one break (and the clean worker keep behaving).

Registered with ``test_fake_faults``'s completeness check by import."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_backend_helpers import PROMPT, admin, faulted, shows

from fake_backends.deployment.assembly import FakeDeployment

LONG_PROMPT = list(range(300, 340))
CHECKPOINTS = ("/ckpt/a", "/ckpt/b", "/ckpt/a")


@pytest.fixture
def dep() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", workers=1) as deployment:
        yield deployment


def greedy(client: httpx.Client, dep: FakeDeployment, prompt: list[int] = PROMPT) -> Any:
    body = {"model": "toy", "prompt": prompt, "max_tokens": 4, "temperature": 0}
    body["nvext"] = {"extra_fields": ["completion_token_ids"]}
    return client.post(f"{dep.frontend_url}/v1/completions", json=body).json()


def refit(client: httpx.Client, base: str, path: str, version: str) -> None:
    admin(client, base, "pause_generation")
    body = {"model_path": path, "weight_version": version}
    assert admin(client, base, "update_weights_from_disk", body)["status"] == "ok"
    admin(client, base, "resume_generation")


def refits(client: httpx.Client, dep: FakeDeployment) -> list[tuple[list[int], Any]]:
    """The greedy ids and the reported version after each of three refits."""
    base = dep.workers[0]["system_url"]
    seen = []
    for step, path in enumerate(CHECKPOINTS, 1):
        refit(client, base, path, f"step-{step}")
        ids = greedy(client, dep)["nvext"]["completion_token_ids"]
        seen.append((ids, admin(client, base, "get_weight_version")["version"]))
    return seen


@shows("update_applied_once")
def test_update_applied_once(client: httpx.Client, dep: FakeDeployment) -> None:
    clean = refits(client, dep)
    assert clean[0][0] != clean[1][0] and clean[0][0] == clean[2][0]  # a, b, a again
    with FakeDeployment("vllm", workers=1) as other, faulted(other, "update_applied_once"):
        faulty = refits(client, other)
    assert faulty[0][0] == clean[0][0]  # the first refit swaps the weights
    assert faulty[1][0] == faulty[0][0] != clean[1][0]  # the second keeps them
    assert [version for _, version in faulty] == ["step-1", "step-2", "step-3"]


@shows("version_stuck_after_first")
def test_version_stuck_after_first(client: httpx.Client, dep: FakeDeployment) -> None:
    clean = refits(client, dep)
    assert [version for _, version in clean] == ["step-1", "step-2", "step-3"]
    with FakeDeployment("vllm", workers=1) as other, faulted(other, "version_stuck_after_first"):
        faulty = refits(client, other)
    assert [version for _, version in faulty] == ["step-1", "step-1", "step-1"]
    assert [ids for ids, _ in faulty] == [ids for ids, _ in clean]  # the weights do change


def cached_after_flushes(client: httpx.Client, dep: FakeDeployment) -> list[int]:
    """The prefix cached after each of three flushes of a prompt just cached."""
    base = dep.workers[0]["system_url"]
    found = []
    for _ in range(3):
        greedy(client, dep, LONG_PROMPT)
        assert greedy(client, dep, LONG_PROMPT)["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert admin(client, base, "flush_cache")["status"] == "ok"
        found.append(
            greedy(client, dep, LONG_PROMPT)["usage"]["prompt_tokens_details"]["cached_tokens"]
        )
    return found


@shows("flush_works_once")
def test_flush_works_once(client: httpx.Client, dep: FakeDeployment) -> None:
    assert cached_after_flushes(client, dep) == [0, 0, 0]
    with FakeDeployment("vllm", workers=1) as other, faulted(other, "flush_works_once"):
        after = cached_after_flushes(client, other)
    assert after[0] == 0 and after[1] > 0 and after[2] > 0
