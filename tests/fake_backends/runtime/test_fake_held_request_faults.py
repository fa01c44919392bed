"""Requests held by a pause and the control steps taken meanwhile, on one SGLang worker driven
directly (no HTTP, no timing but bounded waits): a cache reset after a `retract` pause succeeds
and flushes, a version rename that sent `abort_all_requests: false` keeps the requests; each
fault breaks one of these; a version renamed while a request is paused names only the tokens
after it."""

from __future__ import annotations

import asyncio
from typing import Any

from fake_backend_helpers import PROMPT, faulted, shows

from fake_backends.admin.sglang import flush_cache, update_weight_version
from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.faults.deployment import active_faults
from fake_backends.frontend.sglang_native import SglangEvents, parse_sglang_request
from fake_backends.runtime.scheduler import Generation, WorkerRuntime
from fake_backends.runtime.workers import EngineWorker

RETRACT = "retract"


def sglang_worker(*faults: str) -> EngineWorker:
    return EngineWorker(0, 1, "toy", runtime=WorkerRuntime(active_faults(faults)))


async def admitted(worker: EngineWorker) -> Generation:
    gen = Generation("attempt", "cmpl-attempt")
    assert await worker.runtime.admit(gen)
    return gen


def flush_while_paused(mode: str, *faults: str) -> tuple[dict[str, Any], int]:
    """A request in flight, a `mode` pause, then flush_cache: its answer, and how many prefixes
    the cache keeps (one was cached before)."""

    async def scenario() -> tuple[dict[str, Any], int]:
        worker = sglang_worker(*faults)
        worker.runtime.cache.insert(list(range(16)))
        await admitted(worker)
        await worker.runtime.pause(mode)
        answer = await flush_cache(worker, {})
        return answer, len(worker.runtime.cache)

    return asyncio.run(scenario())


def rename_while(mode: str | None, body: dict[str, Any], *faults: str) -> bool:
    """A request in flight (paused in `mode`, or running for None) across a version rename with
    `body`: whether the rename aborted it."""

    async def scenario() -> bool:
        worker = sglang_worker(*faults)
        gen = await admitted(worker)
        if mode is not None:
            await worker.runtime.pause(mode)
        await update_weight_version(worker, {"new_version": "v2", **body})
        return gen.abort_requested

    return asyncio.run(scenario())


@shows("retract_flush_skipped")
def test_retract_flush_skipped() -> None:
    answer, kept = flush_while_paused("retract")
    assert answer == {"success": True} and kept == 0
    answer, kept = flush_while_paused("retract", "retract_flush_skipped")
    assert answer == {"success": True} and kept == 1
    # faithful either way: a request paused in place still runs, and the flush is refused
    assert flush_while_paused("in_place")[0]["success"] is False
    assert flush_while_paused("in_place", "retract_flush_skipped")[0]["success"] is False


@shows("rename_aborts_kept_requests")
def test_rename_aborts_kept_requests() -> None:
    keep = {"abort_all_requests": False}
    assert not rename_while(None, keep) and not rename_while("retract", keep)
    assert rename_while(None, {}) and rename_while("retract", {})  # SGLang's default aborts
    fault = "rename_aborts_kept_requests"
    assert rename_while(None, keep, fault) and rename_while("retract", keep, fault)


@shows("paused_rename_restamps_tokens")
def test_paused_rename_restamps_tokens(sglang: FakeDeployment) -> None:
    """Two tokens released under `old`, a rename to `new` while paused, two tokens after: the
    faithful spans split there, the faulty ones give all four to `new`."""
    state = sglang.state
    worker = state.workers[0]
    request = parse_sglang_request({"input_ids": PROMPT, "stream": True})

    def spans() -> list[dict[str, Any]]:
        saved = worker.version, worker.version_declared, worker.runtime.paused_renames
        worker.version, worker.version_declared = "old", True
        events = SglangEvents(state, worker, request, cached_tokens=0)
        try:
            events._record_version()
            events._record_version()
            worker.version = "new"
            worker.runtime.paused_renames += 1
            events._record_version()
            events._record_version()
            return events.event(4, final=False)["meta_info"]["weight_versions"]
        finally:
            worker.version, worker.version_declared, worker.runtime.paused_renames = saved

    assert spans() == [
        {"version": "old", "start": 0, "end": 2},
        {"version": "new", "start": 2, "end": 4},
    ]
    with faulted(sglang, "paused_rename_restamps_tokens"):
        assert spans() == [{"version": "new", "start": 0, "end": 4}]


def test_a_rename_while_paused_is_counted() -> None:
    """What the restamp fault reads: renames received while paused, none while running."""

    async def scenario() -> int:
        worker = sglang_worker()
        await update_weight_version(worker, {"new_version": "a", "abort_all_requests": False})
        await worker.runtime.pause(RETRACT)
        await update_weight_version(worker, {"new_version": "b", "abort_all_requests": False})
        return worker.runtime.paused_renames

    assert asyncio.run(scenario()) == 1
