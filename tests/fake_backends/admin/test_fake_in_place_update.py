"""An update while an `in_place` pause holds a request, on the fake SGLang worker: taken by
default; with `sglang_in_place_update_unflushed`, loaded but answered `success: false`, the
cache not flushed, as SGLang 0.5.23 answers (fixtures/KNOWN_DIFFERENCES.md). Driven directly:
no HTTP, no timing."""

from __future__ import annotations

import asyncio

import pytest
from fake_backend_helpers import shows

from fake_backends.admin.sglang import UNFLUSHED, update_weights_from_disk
from fake_backends.faults.deployment import active_faults
from fake_backends.runtime.scheduler import Generation, WorkerRuntime
from fake_backends.runtime.workers import EngineWorker

BODY = {"model_path": "/checkpoints/b", "weight_version": "v-b"}


def update_while(mode: str, *faults: str, holding: bool = True) -> tuple[bool, str, str, bool]:
    """(success, message, the worker's weights tag, its prefix cache reset) after an update
    sent while a `mode` pause holds a request (none when not `holding`)."""
    worker = EngineWorker(0, 1, "m", runtime=WorkerRuntime(active_faults(list(faults))))
    worker.runtime.cache.insert(list(range(64)))

    async def run() -> tuple[bool, str, int]:
        if holding:
            assert await worker.runtime.admit(Generation("held", "cmpl-held"))
        await worker.runtime.pause(mode)
        return await update_weights_from_disk(worker, dict(BODY))

    success, message, _ = asyncio.run(run())
    return success, message, worker.weights_tag, len(worker.runtime.cache) == 0


@shows("sglang_in_place_update_unflushed")
def test_an_in_place_update_holding_a_request_is_answered_unflushed() -> None:
    taken = update_while("in_place")
    refused = update_while("in_place", "sglang_in_place_update_unflushed")
    assert taken[:2] == (True, "Succeeded to update model weights.") and taken[3]
    assert refused[:2] == (False, UNFLUSHED) and not refused[3]
    assert refused[2] == taken[2], "the weights load either way"


@pytest.mark.parametrize(("mode", "holding"), [("retract", True), ("in_place", False)])
def test_the_fault_touches_only_an_in_place_pause_holding_a_request(
    mode: str, holding: bool
) -> None:
    success, *_ = update_while(mode, "sglang_in_place_update_unflushed", holding=holding)
    assert success
