"""One generation request as a state machine: accepted, admitted, streaming, ended.

Why: the RL contract treats a request as a state machine whose terminal state the trainer
must verify (accepted, streaming, terminal success, cancelled, failed), and the control
plane acts on requests *while* they run.  A ``LiveRequest`` ties the HTTP request to its
worker's runtime and to the request ledger:

* ``start`` opens the ledger entry, picks a worker (waiting while none is routable),
  waits for admission (held while the worker is paused), then computes the generation
  with the weights the worker has at that moment;
* ``step`` releases one token, after the ``x-fake-delay-ms`` delay for the first one and
  ``x-fake-token-delay-ms`` between later ones (streams default to one token a
  millisecond, in bursts of 32, so they take real time); it yields to the event loop at
  least every few tokens, so admin calls and disconnects act between tokens; it returns
  False when the worker aborted the request (``step_now`` releases a token at once when no
  wait is due, and says so);
* ``end`` closes the ledger entry with the outcome, feeds the prefix cache and metrics.

Disconnects: ``LiveStreamResponse`` and ``unless_disconnected`` watch the connection and
cancel the request's work when the client goes away, which ends it as ``cancelled`` at
once and stops generation.  The ``cancellation_not_propagated`` fault (and
``late_response_delivered_twice``, which needs the abandoned attempt to keep running)
ignore disconnects: generation runs to the end into a closed connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from fake_backends.encoding.sse_frames import SSE_HEADERS
from fake_backends.frontend.error_bodies import not_ready
from fake_backends.runtime.request_ledger import Outcome
from fake_backends.runtime.scheduler import POLL_SECONDS, UNDELAYED_TOKENS_PER_YIELD, Generation
from fake_backends.runtime.state import DeploymentState
from fake_backends.runtime.workers import EngineWorker, ModelNotReady

T = TypeVar("T")

DELAY_HEADER = "x-fake-delay-ms"
TOKEN_DELAY_HEADER = "x-fake-token-delay-ms"
REQUEST_ID_HEADER = "x-request-id"
MAX_DELAY_MS = 600_000
# Streamed tokens leave at one a millisecond on average (in bursts, `STREAM_TOKEN_BURST`),
# like a (fast) real engine: a client that reads one event and closes must be noticed while
# a long stream still has tokens to go, not after a toy model that never yields has finished
# them all.
STREAM_TOKEN_INTERVAL_S = 0.001
STREAM_TOKEN_BURST = 32
"""Unless a token delay is asked for, a stream's tokens leave in bursts at that rate (32 every
32 ms): the same pace, with one timer wake-up, one turn of the event loop and one write a burst.
A 512-token stream then costs the fake about 16 ms of CPU and its reader about 11 ms, against
about 20 ms and 15 ms in bursts of four; a faithful stream may deliver several tokens at once,
and the suites read events as they come."""

_STATUS = {"completed": "success", "aborted": "success", "cancelled": "cancelled"}


def header_delay_s(request: Request, name: str) -> float:
    """A non-negative millisecond header as seconds (absent or unparsable: 0)."""
    raw = request.headers.get(name)
    if raw is None:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        return 0.0
    return min(max(value, 0.0), MAX_DELAY_MS) / 1000.0


def ignores_disconnects(state: DeploymentState) -> bool:
    return state.faults.active("cancellation_not_propagated") or state.faults.active(
        "late_response_delivered_twice"
    )


class LiveRequest:
    """A generation request from acceptance to its outcome (see the module docstring)."""

    def __init__(
        self,
        state: DeploymentState,
        request: Request,
        *,
        endpoint: str,
        model_label: str,
        response_id: str,
        prompt_ids: Sequence[int],
        pinned: EngineWorker | None,
        stream: bool = False,
    ) -> None:
        self.state = state
        self.route = request.scope["path"]  # ``request.url.path``, without building the URL
        self.endpoint = endpoint
        self.model_label = model_label
        self.response_id = response_id
        self.prompt_ids = tuple(prompt_ids)
        self.pinned = pinned
        given = request.headers.get(REQUEST_ID_HEADER)
        self.attempt_id = given if given else str(uuid.uuid4())
        self.client_named = bool(given)
        self.delay_s = header_delay_s(request, DELAY_HEADER)
        self.burst = 1
        if request.headers.get(TOKEN_DELAY_HEADER) is not None:
            self.token_delay_s = header_delay_s(request, TOKEN_DELAY_HEADER)
        elif stream:
            self.token_delay_s = STREAM_TOKEN_INTERVAL_S * STREAM_TOKEN_BURST
            self.burst = STREAM_TOKEN_BURST
        else:
            self.token_delay_s = 0.0
        self.started = time.perf_counter()
        self.received_ms = int(time.time() * 1000)
        self.stream = stream
        trace = state.request_trace
        self.trace_headers = trace.captured(request.headers) if trace is not None else {}
        self.rl_attempt = request.headers.get("x-rl-attempt-id")
        self.traced_request: Any = None
        """The chat request body, for the trace's payload row (chat completions only)."""
        self.record = state.request_ledger.open(self.attempt_id, self.route, response_id)
        self.worker: EngineWorker | None = None
        self.gen: Generation | None = None
        self.result: Any = None
        self.ended = False
        self._replaying = False
        self._admitted = False
        self.migrations = 0
        state.running.setdefault(self.attempt_id, []).append(self)
        state.metrics.gauge_add("dynamo_frontend_active_requests", {"model": model_label}, 1)

    # -- lifecycle ---------------------------------------------------------------------

    async def start(
        self, compute: Callable[[EngineWorker, int], T], tokens: Callable[[T], int]
    ) -> T:
        """Route, wait for admission, compute; returns what the response is rendered from."""
        earlier = self._still_running_namesake()
        try:
            worker = self.pinned or await self.state.router.acquire()
        except ModelNotReady:
            raise not_ready(self.state.model_name) from None
        self.worker = worker
        worker.counters.started()
        self.state.request_ledger.assign(self.record, worker.instance_id)
        self.gen = Generation(self.attempt_id, self.response_id)
        await worker.runtime.admit(self.gen)
        self._admitted = True
        self.state.metrics.gauge_add(
            "dynamo_frontend_inflight_requests", {"model": self.model_label}, 1
        )
        cached = worker.runtime.cache.cached_tokens(self.prompt_ids)
        worker.runtime.cache.insert(self.prompt_ids)
        own = compute(worker, cached)
        self.result = own
        if earlier is None:
            return own
        # late_response_delivered_twice: generate in full, then answer with the earlier
        # attempt's (late) result instead of our own.
        outcome: Outcome = "completed"
        for _ in range(tokens(own)):
            if not await self.step():
                outcome = "aborted"
                break
        self.end(outcome)
        while not earlier.ended:
            await asyncio.sleep(POLL_SECONDS)
        self._replaying = True
        result: T = earlier.result
        return result

    def _still_running_namesake(self) -> LiveRequest | None:
        if not (self.client_named and self.state.faults.active("late_response_delivered_twice")):
            return None
        for other in self.state.running.get(self.attempt_id, []):
            if other is not self and not other.ended and other.route == self.route:
                return other
        return None

    async def step(self) -> bool:
        """Release one token; False when the worker aborted the request."""
        if self._replaying:
            return True
        assert self.worker is not None and self.gen is not None
        if not await self.worker.runtime.next_token(self.gen, self._next_delay()):
            return False
        self._count_token(self.worker)
        return True

    async def migrated(self) -> bool:
        """After ``step`` said the request ended: whether it goes on on another worker, as
        Dynamo's frontend moves a request whose worker's process died (``--migration-limit``
        times at most), re-prefilled with the tokens released so far. The toy model's
        continuation of prompt and released tokens is the rest of the precomputed generation,
        so the stream goes on where it stopped. A pinned request names its worker: it is not
        moved."""
        state = self.state
        gen, old = self.gen, self.worker
        if gen is None or old is None or not gen.worker_died or self.pinned is not None:
            return False
        if self.migrations >= state.migration_limit:
            return False
        worker = state.router.pick()
        if worker is None:
            return False
        self.migrations += 1
        old.runtime.release(gen)
        old.counters.ended(cancelled=False)
        moved = Generation(self.attempt_id, self.response_id, tokens=gen.tokens)
        self.worker, self.gen = worker, moved
        worker.counters.started()
        self.state.request_ledger.assign(self.record, worker.instance_id)
        return await worker.runtime.admit(moved)

    def step_now(self) -> bool:
        """Release one token if that needs no turn of the event loop (no delay, no yield, no
        pause or abort to look at); False, and nothing released, when ``step`` is needed."""
        worker = self.worker
        if self._replaying or worker is None or self.gen is None:
            return False
        if not worker.runtime.release_now(
            self.gen, self._next_delay(), max(self.burst, UNDELAYED_TOKENS_PER_YIELD)
        ):
            return False
        self._count_token(worker)
        return True

    def _count_token(self, worker: EngineWorker) -> None:
        worker.counters.token_sent()
        self.state.request_ledger.count_token(self.record)

    def _next_delay(self) -> float:
        assert self.gen is not None
        tokens = self.gen.tokens
        if tokens == 0:
            return self.delay_s
        return self.token_delay_s if tokens % self.burst == 0 else 0.0

    def abandon(self) -> None:
        """The client is gone: end as cancelled unless the attempt already ended."""
        self.end("cancelled")

    def end(self, outcome: Outcome, generated: Sequence[int] = ()) -> None:
        """Close the attempt once (later calls are ignored)."""
        if self.ended:
            return
        self.ended = True
        state = self.state
        state.request_ledger.close(self.record, outcome)
        if self.worker is not None:
            self.worker.counters.ended(cancelled=outcome == "cancelled")
        if outcome == "cancelled":
            state.metrics.client_cancelled(model=self.model_label, endpoint=self.endpoint)
        if self.worker is not None and self.gen is not None:
            self.worker.runtime.release(self.gen)
            if outcome == "completed" and generated:
                self.worker.runtime.cache.insert((*self.prompt_ids, *generated))
            state.metrics.tokens_generated(
                model=self.model_label, worker_id=self.worker.instance_id, tokens=self.gen.tokens
            )
        if self._admitted:
            state.metrics.gauge_add(
                "dynamo_frontend_inflight_requests", {"model": self.model_label}, -1
            )
        state.metrics.gauge_add("dynamo_frontend_active_requests", {"model": self.model_label}, -1)
        state.metrics.request_finished(
            model=self.model_label,
            endpoint=self.endpoint,
            status=_STATUS.get(outcome, "error"),
            duration_s=time.perf_counter() - self.started,
            request_id=self.attempt_id if state.faults.active("metrics_high_cardinality") else None,
            rl_attempt_id=self.rl_attempt
            if state.faults.active("metrics_rl_attempt_label")
            else None,
        )
        self._trace(outcome)
        namesakes = state.running.get(self.attempt_id)
        if namesakes is not None:
            with contextlib.suppress(ValueError):
                namesakes.remove(self)
            if not namesakes:
                del state.running[self.attempt_id]

    def _trace(self, outcome: Outcome) -> None:
        """The request's trace rows: its payload (chat only), then its end unless the client
        went away (upstream's join fixtures: a disconnected request has no end row)."""
        trace = self.state.request_trace
        if trace is None:
            return
        request_id = self.response_id.split("-", 1)[-1]
        if self.traced_request is not None:
            dropped = self.stream and self.state.faults.active("trace_stream_headers_dropped")
            trace.payload(
                request_id,
                self.model_label,
                self.traced_request,
                {} if dropped else self.trace_headers,
                complete=outcome == "completed",
            )
        if outcome == "cancelled" or self.worker is None:
            return
        if self.stream and self.state.faults.active("trace_stream_end_missing"):
            return
        trace.end(
            request_id,
            input_tokens=len(self.prompt_ids),
            output_tokens=self.gen.tokens if self.gen is not None else 0,
            received_ms=self.received_ms,
            worker_id=self.worker.instance_id,
        )

    @contextlib.contextmanager
    def outcome_guard(self) -> Iterator[None]:
        """End the attempt as cancelled when its work is torn down, failed on a bug."""
        try:
            yield
        except (GeneratorExit, asyncio.CancelledError):
            self.end("cancelled")
            raise
        except Exception:
            self.end("failed")
            raise


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


_SSE_RAW_HEADERS = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in SSE_HEADERS.items()]


class LiveStreamResponse:
    """An SSE response (an ASGI callable) that notices a client disconnect at once and stops
    the stream.

    A response that only writes may find out at the next write; generation must stop when the
    client goes away, not when the next token is ready.  The frames are relayed in the
    request's own task (``unless_disconnected``): no task per stream to start and wait for.
    """

    def __init__(
        self,
        frames: AsyncGenerator[bytes, None],
        *,
        ignore_disconnect: bool,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        """``on_close`` runs last, whatever happened (even if ``frames`` never started)."""
        self._frames = frames
        self._ignore_disconnect = ignore_disconnect
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await unless_disconnected(receive, self._relay(send), ignore=self._ignore_disconnect)
        finally:
            await self._frames.aclose()
            if self._on_close is not None:
                self._on_close()

    async def _relay(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_RAW_HEADERS})
        async for chunk in self._frames:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def unless_disconnected(
    receive: Receive, work: Coroutine[Any, Any, T], *, ignore: bool
) -> T | None:
    """Run ``work``; cancel it and return None if the client disconnects first.

    The work runs in the caller's task (no task of its own to start and wait for); a watcher
    cancels that task when the client goes away, and only that cancellation is absorbed."""
    if ignore:
        return await work
    current = asyncio.current_task()
    assert current is not None
    running = True
    gone = False

    def on_disconnect(watch: asyncio.Future[None]) -> None:
        nonlocal gone
        if running and not watch.cancelled():
            watch.exception()  # retrieved: a failed watch counts as a disconnect
            gone = True
            current.cancel()

    watch = asyncio.ensure_future(_wait_disconnect(receive))
    watch.add_done_callback(on_disconnect)
    try:
        result = await work
    except asyncio.CancelledError:
        if gone and current.uncancel() == 0:
            return None  # the work was cancelled because the client went away
        raise
    finally:
        running = False
        watch.cancel()
    if gone:  # the work finished anyway: the cancellation meant for it is void
        current.uncancel()
    return result


def round_robin(lengths: Sequence[int]) -> list[int]:
    """Choice positions in release order: one token of each unfinished choice in turn."""
    if len(lengths) == 1:
        return [0] * lengths[0]
    order: list[int] = []
    for step in range(max(lengths, default=0)):
        order.extend(i for i, length in enumerate(lengths) if step < length)
    return order
