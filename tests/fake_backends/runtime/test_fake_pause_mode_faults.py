"""The pause-mode faults manifest on a worker's runtime: each test shows the faulty and the clean
behaviour of one worker, driven directly (no HTTP, no timing but bounded waits)."""

from __future__ import annotations

import asyncio

import pytest
from fake_backend_helpers import shows

from fake_backends.faults.deployment import active_faults
from fake_backends.runtime.scheduler import Generation, WorkerRuntime

BOUND_S = 0.2


async def generating(runtime: WorkerRuntime) -> tuple[Generation, asyncio.Task[int]]:
    """A request admitted and generating until it is aborted, as the frontend drives one."""
    gen = Generation("attempt", "cmpl-attempt")
    assert await runtime.admit(gen)

    async def run() -> int:
        while await runtime.next_token(gen, 0.001):
            pass
        runtime.release(gen)
        return gen.tokens

    return gen, asyncio.create_task(run())


async def pause_answers_at_once(runtime: WorkerRuntime, mode: str) -> bool:
    try:
        await asyncio.wait_for(runtime.pause(mode), BOUND_S)
    except TimeoutError:
        return False
    return True


def mode_applied(mode: str, *faults: str) -> tuple[bool, bool, bool]:
    """A `mode` pause with a request in flight: (answered at once, request aborted, frozen)."""

    async def scenario() -> tuple[bool, bool, bool]:
        runtime = WorkerRuntime(active_faults(faults))
        gen, task = await generating(runtime)
        answered = await pause_answers_at_once(runtime, mode)
        aborted, frozen = gen.abort_requested, runtime.freezes_in_flight()
        runtime.resume()
        gen.abort_requested = True
        await task
        return answered, aborted, frozen

    return asyncio.run(scenario())


@shows("pause_mode_ignored")
def test_pause_mode_ignored() -> None:
    assert mode_applied("abort") == (True, True, False)
    assert mode_applied("abort", "pause_mode_ignored") == (True, False, True)
    assert mode_applied("wait")[0] is False  # a wait pause waits for the request in flight
    assert mode_applied("wait", "pause_mode_ignored") == (True, False, True)


@shows("wait_answers_early")
def test_wait_answers_early() -> None:
    assert mode_applied("wait", "wait_answers_early") == (True, False, True)
    assert mode_applied("abort", "wait_answers_early") == (True, True, False)


@shows("in_place_pause_aborts")
def test_in_place_pause_aborts() -> None:
    assert mode_applied("in_place") == (True, False, True)
    assert mode_applied("in_place", "in_place_pause_aborts") == (True, True, False)


@shows("retract_pause_aborts")
def test_retract_pause_aborts() -> None:
    assert mode_applied("retract") == (True, False, True)
    assert mode_applied("retract", "retract_pause_aborts") == (True, True, False)
    assert mode_applied("in_place", "retract_pause_aborts") == (True, False, True)


@pytest.mark.parametrize("counted", [False, True])
def test_pause_counted_per_caller_holds_until_as_many_resumes(counted: bool) -> None:
    held_after_two_pauses(
        WorkerRuntime(active_faults(["pause_counted_per_caller"] if counted else [])), counted
    )


def held_after_two_pauses(runtime: WorkerRuntime, counted: bool) -> None:
    """Paused twice and resumed once, `runtime` holds new work only when it counts pauses."""

    async def twice() -> None:
        await runtime.pause("keep")
        await runtime.pause("keep")

    asyncio.run(twice())
    runtime.resume()
    assert runtime.holds_new() is counted
    runtime.resume()
    assert not runtime.holds_new()


@shows("pause_counted_per_caller")
def test_pause_counted_per_caller() -> None:
    test_pause_counted_per_caller_holds_until_as_many_resumes(True)


@shows("pause_counted_past_first_worker")
def test_pause_counted_past_first_worker() -> None:
    faults = active_faults(["pause_counted_past_first_worker"])
    for first, counted in ((True, False), (False, True)):
        held_after_two_pauses(WorkerRuntime(faults, first=first), counted)


@shows("resume_slow")
def test_resume_slow() -> None:
    for faults, held in (([], False), (["resume_slow"], True)):
        runtime = WorkerRuntime(active_faults(faults))
        asyncio.run(runtime.pause("keep"))
        runtime.resume()
        assert not runtime.paused  # the resume answered ok either way
        assert runtime.holds_new() is held


@shows("admits_after_pause")
def test_admits_after_pause() -> None:
    for faults, held in (([], True), (["admits_after_pause"], False)):
        runtime = WorkerRuntime(active_faults(faults))
        asyncio.run(runtime.pause("abort"))
        assert runtime.holds_new() is held


def test_the_toy_engine_behind_real_dynamo_pauses_without_these_faults() -> None:
    """The toy Dynamo worker's runtime carries the engine catalogue, which has none of the
    pause-mode faults: there they are off, never a lookup error."""
    from fake_backends.faults.engine import engine_faults

    runtime = WorkerRuntime(engine_faults())
    asyncio.run(runtime.pause("abort"))
    assert runtime.holds_new() and runtime.pause_mode == "abort"
    runtime.resume()
    assert not runtime.holds_new()
