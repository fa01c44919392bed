"""Driving an adapter through a scenario's steps as a trainer would, each call bounded.

An adapter may be synchronous or asynchronous (`async def` methods, run on an event loop the kit
owns, one per scenario), and declares what it implements (`implements`: generation, refresh or
both). A step the adapter does not implement is not driven. A call that outlives its bound is
abandoned and reported `hung`: an asynchronous call is cancelled; a synchronous rollout has its
`CancelToken` set, since a thread cannot be stopped from outside.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import site
import sysconfig
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from .audit import NOT_CLAIMED, AuditLog, Step
from .fleet_events import SLOW_TOKEN_MS
from .protocol import (
    GENERATION,
    REFRESH,
    GenerationGated,
    Policy,
    RefreshFailed,
    RolloutRequest,
)
from .scenarios import (
    MAX_TOKENS,
    OBSERVATION,
    PROMPT,
    UNARY_LEAD_TOKENS,
    Generate,
    GenerateAcross,
    Refresh,
    Scenario,
)

STEP_BOUND_S = 20.0
"""No step may take longer; an adapter that hangs is reported, never waited for."""
CANCEL_WAIT_S = 5.0
STAGE_WAIT_S = 30.0
"""How long a cancellation waits for the events (or the held reply) it is staged after: a bound,
not a pace; on a loaded machine the adapter's first events can take seconds to arrive."""


class AdapterHandle:
    """One adapter as the kit calls it: synchronous or not, with what it claims to implement."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self.implements = claims(adapter)
        self.asynchronous = any(
            inspect.iscoroutinefunction(getattr(adapter, name, None))
            for name in ("generate", "refresh_policy", "close")
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        if self.asynchronous:
            self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=self._loop.run_forever, daemon=True, name="adapter-loop"
            )
            self._loop_thread.start()

    def call(self, method: str, *args: Any) -> tuple[Callable[[], Any], Callable[[], None]]:
        """A blocking call of `method`, and how to abandon it (an asynchronous call is
        cancelled; a synchronous one cannot be)."""
        function = getattr(self.adapter, method)
        loop = self._loop
        running: list[Future[Any]] = []

        def blocking() -> Any:
            result = function(*args)
            if loop is None or not inspect.isawaitable(result):
                return result
            future = asyncio.run_coroutine_threadsafe(awaited(result), loop)
            running.append(future)
            return future.result()

        def abandon() -> None:
            for future in running:
                future.cancel()

        return blocking, abandon

    def close(self) -> tuple[str, Any]:
        """The adapter's `close` (when it has one), then the kit's event loop, stopped and
        closed once its thread returned."""
        outcome = bounded(*self.call("close")) if hasattr(self.adapter, "close") else ("", None)
        if self._loop is not None and self._loop_thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(CANCEL_WAIT_S)
            if not self._loop_thread.is_alive():
                self._loop.close()
        return outcome


async def awaited(awaitable: Any) -> Any:
    """A coroutine of any awaitable (what `run_coroutine_threadsafe` and `asyncio.run` take)."""
    return await awaitable


def claims(adapter: Any) -> frozenset[str]:
    """What an adapter declares it implements (`implements`), by default both halves."""
    declared = getattr(adapter, "implements", None)
    if declared is None:
        return frozenset({GENERATION, REFRESH})
    chosen = frozenset({declared} if isinstance(declared, str) else declared)
    unknown = chosen - {GENERATION, REFRESH}
    if unknown or not chosen:
        raise ValueError(
            f"implements: expected a non-empty set of {GENERATION!r} and {REFRESH!r}, "
            f"observed {sorted(chosen) if chosen else declared!r}"
        )
    return chosen


def bounded(
    call: Callable[[], Any], on_abandon: Callable[[], None] | None = None
) -> tuple[str, Any]:
    """Run one adapter call on a daemon thread: (`returned`|`gated`|`refresh-failed`|
    `raised: ...`|`hung`, detail). A call still running at the bound is abandoned."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
            box["outcome"] = "returned"
        except GenerationGated as exc:
            box.update(outcome="gated", value=str(exc))
        except RefreshFailed as exc:
            box.update(outcome="refresh-failed", value=str(exc))
        except BaseException as exc:  # an adapter's own errors, and its cancelled coroutines
            box.update(outcome=f"raised: {type(exc).__name__}: {exc}", value=raised_at(exc))

    worker = threading.Thread(target=target, daemon=True, name="certify-step")
    worker.start()
    worker.join(STEP_BOUND_S)
    if worker.is_alive():
        if on_abandon is not None:
            on_abandon()
        return "hung", f"did not return within {STEP_BOUND_S:.0f} s (abandoned)"
    return box["outcome"], box.get("value")


def raised_at(exc: BaseException) -> str:
    """An exception as an adapter author needs it: type, message and the adapter's own frame
    (the deepest one outside this module, the standard library and installed packages), with
    no source line quoted."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if os.path.abspath(frame.filename) != os.path.abspath(__file__)
    ]
    own = [frame for frame in frames if not _library(frame.filename)] or frames
    where = f" at {_short(own[-1].filename)}:{own[-1].lineno} in {own[-1].name}" if own else ""
    return f"{type(exc).__name__}: {exc}{where}"


_LIBRARIES = tuple(
    {os.path.abspath(p) for p in (sysconfig.get_paths()["stdlib"], *site.getsitepackages())}
)


def _library(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_LIBRARIES)


def _short(filename: str) -> str:
    """A path relative to the working directory when it lies under it."""
    relative = os.path.relpath(os.path.abspath(filename))
    return filename if relative.startswith("..") else relative


@dataclass
class Driver:
    """One scenario's steps through one adapter."""

    handle: AdapterHandle
    scenario: Scenario
    log: AuditLog
    admitting: Callable[[int], None]
    """Told the index of the step whose admissions follow."""
    checkpoint: Callable[[Refresh], str]
    """The real, writable checkpoint directory of a planned refresh."""
    turns: dict[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    """Per trajectory, how many turns were driven and the next turn's prompt."""

    def drive(self) -> list[Step]:
        steps: list[Step] = []
        for planned in self.scenario.steps:
            index = len(steps)
            self.admitting(index)
            started = time.monotonic()
            if isinstance(planned, GenerateAcross):
                steps.extend(self.overlapped(planned, index, started))
            elif isinstance(planned, Generate):
                steps.append(self.rollout(planned, index, started))
            else:
                steps.append(self.refresh(planned, index, started))
            self.log.steps = steps
        return steps

    def policy(self, planned: Refresh) -> Policy:
        return Policy(planned.version, self.checkpoint(planned), planned.step)

    def request(self, planned: Generate) -> RolloutRequest:
        """A single-turn rollout's request, or the next turn of its trajectory."""
        if planned.trajectory is None:
            return RolloutRequest(planned.slot, PROMPT, MAX_TOKENS)
        turn, prompt = self.turns.get(planned.trajectory, (0, PROMPT))
        return RolloutRequest(
            planned.slot, prompt, MAX_TOKENS, trajectory=planned.trajectory, turn=turn
        )

    def next_turn(self, request: RolloutRequest, sample: Any) -> None:
        """The prompt of the turn after `request`: its prompt, the ids it generated (none when
        it gave no sample) and the environment's reply."""
        if request.trajectory is None:
            return
        generated = tuple(getattr(sample, "token_ids", ()) or ())
        self.turns[request.trajectory] = (
            request.turn + 1,
            request.prompt_ids + generated + OBSERVATION,
        )

    def rollout(self, planned: Generate, index: int, started: float) -> Step:
        if GENERATION not in self.handle.implements:
            return Step(index, "generate", planned.slot, started, started, NOT_CLAIMED)
        request = self.request(planned)
        cancelled = False
        if planned.cancel_after_events is not None:
            outcome, detail, cancelled = self.cancelled(
                request, planned.cancel_after_events, started
            )
        else:
            outcome, detail = self.generate(request)
        self.next_turn(request, detail if outcome == "returned" else None)
        time.sleep(0.02)  # let the proxy finish recording what the step sent
        finished = time.monotonic()
        return Step(index, "generate", planned.slot, started, finished, outcome, detail, cancelled)

    def refresh(self, planned: Refresh, index: int, started: float) -> Step:
        if REFRESH not in self.handle.implements:
            return Step(index, "refresh", planned.version, started, started, NOT_CLAIMED)
        outcome, detail = bounded(*self.handle.call("refresh_policy", self.policy(planned)))
        time.sleep(0.02)
        return Step(index, "refresh", planned.version, started, time.monotonic(), outcome, detail)

    def generate(self, request: RolloutRequest) -> tuple[str, Any]:
        call, cancel_call = self.handle.call("generate", request)

        def abandon() -> None:
            request.cancel.cancel()
            cancel_call()

        return bounded(call, abandon)

    def overlapped(self, planned: GenerateAcross, index: int, since: float) -> list[Step]:
        """The rollout on its own thread, the refresh once its first event reached the client
        (or it returned first); both bounded. Two steps, the rollout's first: admissions belong
        to it."""
        if GENERATION not in self.handle.implements:
            skipped = Step(index, "generate", planned.slot, since, since, NOT_CLAIMED)
            return [skipped, self.refresh(planned.refresh, index + 1, time.monotonic())]
        request = RolloutRequest(planned.slot, PROMPT, MAX_TOKENS)
        result: dict[str, Any] = {}

        def rollout() -> None:
            result.update(zip(("outcome", "value"), self.generate(request), strict=True))
            result["at"] = time.monotonic()

        thread = threading.Thread(target=rollout, daemon=True, name="certify-rollout")
        thread.start()
        deadline = time.monotonic() + CANCEL_WAIT_S
        while not self.generating(since) and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.01)
        refresh = self.refresh(planned.refresh, index + 1, time.monotonic())
        thread.join(STEP_BOUND_S)
        time.sleep(0.02)
        generate = Step(
            index,
            "generate",
            planned.slot,
            since,
            result.get("at", time.monotonic()),
            result.get("outcome", "hung"),
            result.get("value"),
        )
        return [generate, refresh]

    def generating(self, since: float) -> bool:
        """The rollout's tokens are being generated: a streamed one delivered its first event;
        a unary one (nothing reaches the client before the end) has been at the engine for
        `UNARY_LEAD_TOKENS` of the slowed engine's token times."""
        if self.log.events_delivered(since) >= 1:
            return True
        lead = UNARY_LEAD_TOKENS * SLOW_TOKEN_MS / 1000
        return any(
            not r.streamed and time.monotonic() - r.started >= lead
            for r in self.log.records
            if r.is_generation and r.started >= since and r.staged
        )

    def cancelled(self, request: RolloutRequest, after: int, since: float) -> tuple[str, Any, bool]:
        """Cancel the rollout once `after` events reached the client, or once the proxy holds
        its unary reply (which has no events to count); whether the cancellation came while the
        call was still running (an adapter that had already returned was not cancelled)."""
        result: dict[str, Any] = {}
        thread = threading.Thread(
            target=lambda: result.update(
                zip(("outcome", "value"), self.generate(request), strict=True)
            ),
            daemon=True,
        )
        thread.start()
        deadline = time.monotonic() + STAGE_WAIT_S
        while (
            self.log.events_delivered(since) < after
            and not self.log.replies_held(since)
            and time.monotonic() < deadline
            and thread.is_alive()
        ):
            time.sleep(0.01)
        in_flight = thread.is_alive()
        request.cancel.cancel()
        thread.join(STEP_BOUND_S)
        return result.get("outcome", "hung"), result.get("value"), in_flight
