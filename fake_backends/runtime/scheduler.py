"""What one engine worker is doing right now: admission, pause, abort, drain, prefix cache.

Why a runtime per worker: the administration routes only mean something if they change
what generation does on *that* worker.  Every generation request passes through its
worker's runtime twice: once at admission (held while the worker is paused or draining)
and once before every token (frozen while paused in a keep-like mode, ended when aborted).
The admin handlers flip the same state, so "pause(keep) freezes in-flight requests and
holds new ones until resume" is real behaviour, observable from a client.

Pause modes and what they do to requests (vLLM: keep|wait|abort; SGLang: abort|retract|
in_place):

* ``keep``, ``retract``, ``in_place``: in-flight requests freeze (no more tokens), new
  ones are held; both continue after resume;
* ``wait``: in-flight requests finish normally (the pause call returns when they have),
  new ones are held;
* ``abort``: the worker's requests end at once, generating or held at admission (finish
  "cancelled" -> OpenAI "stop"); requests that arrive later are held.

Waiting is done by polling a few milliseconds apart: simple, and correct whichever thread
flips the state (tests poke workers from their own thread).  The ``pause_not_applied``
fault makes pauses bookkeeping only: acknowledged and visible to the update routes, but
nothing is held, frozen or aborted (``pause_reaches_first_worker_only``: on every worker but the
deployment's first).  Other faults apply another mode than the one asked
(``pause_mode_ignored``, ``wait_answers_early``, ``in_place_pause_aborts``,
``retract_pause_aborts``), admit requests arriving while paused (``admits_after_pause``), count
pauses (``pause_counted_per_caller``; ``pause_counted_past_first_worker`` on every worker but
the first) or keep new requests held for a while after a resume (``resume_slow``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from fake_backends.faults.catalogue import ActiveFaults
from fake_backends.faults.deployment import active_faults
from fake_backends.model.prefix_cache import PrefixCache

POLL_SECONDS = 0.002
UNDELAYED_TOKENS_PER_YIELD = 4

FREEZE_MODES = frozenset({"keep", "retract", "in_place"})
RESUME_SLOW_S = 3.5
"""How long new requests stay held after a resume under the ``resume_slow`` fault."""
RESPONSE_ID_PREFIXES = ("cmpl-", "chatcmpl-")


@dataclass(eq=False)
class Generation:
    """One request assigned to a worker, from admission to its end."""

    attempt_id: str
    response_id: str
    admitted: bool = False
    abort_requested: bool = False
    crashed: bool = False
    """Its engine died under it (the abort is a failure, not a cancellation)."""
    worker_died: bool = False
    """Its worker's process died under it: the frontend may move it to another worker."""
    tokens: int = 0

    def ids(self) -> tuple[str, ...]:
        """Every id an ``abort_request`` may name this request by.

        The client's ``x-request-id``, the response id, and the response id without its
        ``cmpl-``/``chatcmpl-`` prefix (the engine-side request id).
        """
        bare = ""
        for prefix in RESPONSE_ID_PREFIXES:
            if self.response_id.startswith(prefix):
                bare = self.response_id[len(prefix) :]
        return tuple(i for i in (self.attempt_id, self.response_id, bare) if i)


class ClientGone(Exception):
    """The request's client went away while it waited (its `stopped` check said so)."""


class WorkerRuntime:
    """Scheduling state of one worker; mutated only from the deployment's event loop.

    `stopped`, where a caller gives one, is polled while a request waits (held at admission or
    frozen between tokens): a client that went away raises `ClientGone` there instead of
    waiting for a resume. `close()` ends every request at its next wait, as a worker that shuts
    down does."""

    def __init__(self, faults: ActiveFaults | None = None, *, first: bool = True) -> None:
        self.faults = faults if faults is not None else active_faults()
        self.first = first  # the deployment's first worker (the ``..._first_worker`` faults)
        self.paused = False
        self.pause_mode: str | None = None
        self.pauses = 0  # pauses since the last effective resume
        self.held_until = 0.0  # monotonic time until which a slow resume still holds new work
        self.routable = True  # SGLang workers leave routing when paused or released
        self.registered = True  # a native-sidecar worker unregisters its generate endpoint
        self.memory_released = False
        self.updates = 0  # weight updates applied (or answered) so far
        self.flushes = 0  # prefix-cache flushes asked for by a route so far
        self.paused_renames = 0  # version renames received while paused
        self.departed = False  # the worker's process went away (control port `/departure`)
        self.crashed = False  # the worker's process died: its system server answers nothing
        self.draining = 0  # > 0 while an unpaused update waits for in-flight requests
        self.cache = PrefixCache()
        self.closing = False
        self._generations: set[Generation] = set()

    # -- what generation sees --------------------------------------------------------------

    @property
    def pause_applies(self) -> bool:
        """Whether a pause does anything here beyond its bookkeeping."""
        if self.faults.active("pause_not_applied"):
            return False
        return self.first or not self.faults.active("pause_reaches_first_worker_only")

    @property
    def _pause_effective(self) -> bool:
        return self.paused and self.pause_applies

    def holds_new(self) -> bool:
        """New requests wait at admission."""
        if self.draining > 0 or time.monotonic() < self.held_until:
            return True
        return self._pause_effective and not self.faults.active("admits_after_pause")

    def freezes_in_flight(self) -> bool:
        return self._pause_effective and self.pause_mode in FREEZE_MODES

    async def admit(self, gen: Generation, stopped: Callable[[], bool] | None = None) -> bool:
        """Register the request and wait until the worker takes new work; False when the
        worker is closing."""
        self._generations.add(gen)
        while self.holds_new() and not self._ends(gen):
            _check(stopped)
            await asyncio.sleep(POLL_SECONDS)
        gen.admitted = True
        return not self._ends(gen)

    async def next_token(
        self, gen: Generation, delay_s: float = 0.0, stopped: Callable[[], bool] | None = None
    ) -> bool:
        """Wait until the next token may be produced; False when the request was aborted."""
        # Let admin calls and disconnects in between tokens: a delay sleeps (in slices of at
        # most 10 ms, so an abort is seen within one); without one, a generation yields every
        # few tokens (each yield is a turn of the event loop, most of an undelayed token's cost).
        if delay_s <= 0 or self._ends(gen):
            if gen.tokens % UNDELAYED_TOKENS_PER_YIELD == 0 or self._ends(gen):
                await asyncio.sleep(0)
        else:
            deadline = time.monotonic() + delay_s
            remaining = delay_s
            while remaining > 0 and not self._ends(gen):
                await asyncio.sleep(min(remaining, 0.01))
                remaining = deadline - time.monotonic()
        while self.paused and self.freezes_in_flight() and not self._ends(gen):
            _check(stopped)
            await asyncio.sleep(POLL_SECONDS)
        if stopped is not None:
            _check(stopped)
        if self._ends(gen):
            return False
        gen.tokens += 1
        return True

    def release_now(
        self, gen: Generation, delay_s: float = 0.0, yield_every: int = UNDELAYED_TOKENS_PER_YIELD
    ) -> bool:
        """``next_token(gen, delay_s)`` when it would not give the event loop a turn: the token
        is released and True returned; False (nothing done) when it would, or might, wait.
        ``yield_every``: tokens that may leave between two turns of the loop (a paced stream's
        burst, whose delay is its turn)."""
        if (
            delay_s > 0
            or gen.tokens % yield_every == 0
            or self.paused
            or gen.abort_requested
            or self.closing
        ):
            return False
        gen.tokens += 1
        return True

    def _ends(self, gen: Generation) -> bool:
        return gen.abort_requested or self.closing

    def close(self) -> None:
        """Every request ends at its next wait (held ones too), as at a worker's shutdown."""
        self.closing = True

    def release(self, gen: Generation) -> None:
        self._generations.discard(gen)

    # -- what the admin routes see -----------------------------------------------------

    def in_flight(self) -> list[Generation]:
        return [g for g in self._generations if g.admitted]

    def requests(self) -> int:
        """Requests assigned to this worker, admitted or held."""
        return len(self._generations)

    def has_requests(self) -> bool:
        """Any request assigned to this worker, admitted or held."""
        return bool(self._generations)

    def abort(self, which: Callable[[Generation], bool] | None = None) -> int:
        """Ask matching requests of this worker to end now, generating or held at admission
        (a request the worker accepted is its to abort); returns how many were asked."""
        chosen = [g for g in self._generations if which is None or which(g)]
        for gen in chosen:
            gen.abort_requested = True
        return len(chosen)

    def crash_engine(self) -> int:
        """The engine died under the worker (its sidecar restarts it): every request of this
        worker ends now, as a failure; how many."""
        for gen in self._generations:
            gen.crashed = True
        return self.abort()

    def crash(self) -> None:
        """The worker's process dies: it leaves routing and discovery, its requests end, and
        its system server answers nothing more."""
        self.crashed = self.departed = True
        self.registered = False
        self.abort()

    def kill(self) -> int:
        """The worker's process is killed (SIGKILL): as `crash`, and every request it was
        generating lost its worker (the frontend may migrate them); how many."""
        for gen in self._generations:
            gen.crashed = gen.worker_died = True
        self.crash()
        return sum(1 for gen in self._generations if gen.worker_died)

    def revive(self) -> None:
        """The killed worker's process is started again: it serves and registers anew."""
        self.crashed = self.departed = self.closing = False
        self.registered = True

    def abort_id(self, request_id: str) -> int:
        return self.abort(lambda g: request_id in g.ids())

    async def drain(self) -> None:
        """Wait until no admitted request is left (held ones stay held)."""
        while self.in_flight():
            await asyncio.sleep(POLL_SECONDS)

    def _applied(self, mode: str) -> str:
        """The mode a pause in ``mode`` applies: itself, unless a fault applies another."""
        if mode in ("abort", "wait") and self.faults.active("pause_mode_ignored"):
            return "keep"
        if mode == "wait" and self.faults.active("wait_answers_early"):
            return "keep"
        if mode == "in_place" and self.faults.active("in_place_pause_aborts"):
            return "abort"
        if mode == "retract" and self.faults.active("retract_pause_aborts"):
            return "abort"
        return mode

    async def pause(self, mode: str) -> None:
        """Pause in ``mode``; returns once the mode's promise holds (see module docstring)."""
        mode = self._applied(mode)
        self.paused = True
        self.pause_mode = mode
        self.pauses += 1
        if not self.pause_applies:
            return
        if mode == "abort":
            self.abort()
            await self.drain()
        elif mode == "wait":
            await self.drain()

    def resume(self) -> None:
        if self._counts_pauses() and self.pauses > 1:
            self.pauses -= 1
            return
        self.pauses = 0
        self.paused = False
        self.pause_mode = None
        if self.faults.active("resume_slow"):
            self.held_until = time.monotonic() + RESUME_SLOW_S

    def _counts_pauses(self) -> bool:
        if self.faults.active("pause_counted_per_caller"):
            return True
        return not self.first and self.faults.active("pause_counted_past_first_worker")

    @contextlib.asynccontextmanager
    async def quiesced(self) -> AsyncIterator[None]:
        """Hold new requests and let in-flight ones finish, for the body of the block.

        An SGLang weight update on an unpaused worker takes the model-update lock this
        way: it waits for running requests, and requests arriving meanwhile wait for it.
        """
        self.draining += 1
        try:
            await self.drain()
            yield
        finally:
            self.draining -= 1

    def flush(self, asked: bool = False) -> bool:
        """Clear the prefix cache; False when the ``kv_not_flushed`` fault kept it, or, for a
        flush asked for by a route (not the one an update makes), ``flush_works_once`` after
        the first."""
        self.flushes += asked
        if self.faults.active("kv_not_flushed"):
            return False
        if asked and self.flushes > 1 and self.faults.active("flush_works_once"):
            return False
        self.cache.clear()
        return True


def _check(stopped: Callable[[], bool] | None) -> None:
    if stopped is not None and stopped():
        raise ClientGone
