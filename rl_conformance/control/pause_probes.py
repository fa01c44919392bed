"""Generation watched across a pause, for the verdicts about what a pause does rather than what it
answers: a stream in flight when the pause is sent (what its mode did to it), a request sent once
the pause answered (held until the resume), and the first generation after a resume (how long it
waited).

Every wait is sized from the worker's own unpaused first-token time (`watch_s`), and every count
is read before the next control call is sent, so a token counted "while paused" was delivered
before the resume was even sent: no verdict races the engine.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..checks import straddle, terminal
from ..checks.pause_modes import AfterResume, Crossing
from ..client.http import Client
from ..model.target import Target
from ..model.verdict import Verdict
from ..wire.exchange import Exchange
from .admin import AdminClient, AdminWorker
from .admin_steps import Selection, paused
from .each_worker import pins
from .inflight import EndedBeforeStep, InFlightStream, Mark, first_token_s, in_flight_budget
from .refresh import pinned_generation

HELD_S = 0.6
WATCH_FACTOR = 5
"""A paused worker is watched for this many times its unpaused first-token time (at least
`HELD_S`): unpaused, it would have delivered well within it."""
PROBE_TOKENS = 8
RETRY_S = 0.2
"""Between a refused generation after a resume and the next one."""
IN_FLIGHT_ATTEMPTS = 3
"""Sets of streams started for one crossing at most. On a loaded machine a real engine can run a
stream to its end before the harness is scheduled to send the pause (its first token read late,
the rest in the same burst): that set says nothing and is replaced by a new one; the pause is
sent only with streams still open, and the verdict read from that one crossing."""


def watch_s(unpaused_s: float) -> float:
    return max(HELD_S, WATCH_FACTOR * unpaused_s)


def each_first_token_s(
    verdict: Verdict,
    client: Client,
    target: Target,
    workers: tuple[AdminWorker | None, ...],
    prompt: list[int],
) -> list[float]:
    """Each worker's unpaused first-token time (`each_worker.pins`, a `PROBE_TOKENS` stream
    pinned to it), measured now: what a verdict about that worker is sized from."""
    return [
        first_token_s(
            verdict,
            client,
            target,
            prompt,
            None if worker is None else worker.instance_id,
            PROBE_TOKENS,
        )
        for worker in workers
    ]


def crossings(
    verdict: Verdict,
    client: Client,
    target: Target,
    admin: AdminClient,
    chosen: Selection,
    mode: str,
    prompt: list[int],
    watched_s: float,
) -> list[tuple[AdminWorker | None, Crossing]]:
    """Pause the chosen workers in `mode` with a long stream in flight on each (`pins`; each
    sent once its first token arrived and it showed its pace, `InFlightStream.show_pace`),
    watch them while paused for `watched_s` in two halves (less when they end), resume, and read
    what each delivered at each step, its answer read when its own worker's pause answered. A
    stream that delivered nothing before the pause is `Unobservable`
    (`start_and_wait_first_token`); streams that ended before it are replaced, up to
    `IN_FLIGHT_ATTEMPTS` sets, and the last set is paused whatever it holds (its crossing then
    says it ran to its end, and is not judged)."""
    workers = pins(chosen)
    budget = in_flight_budget(client, target, len(prompt))
    for attempt in range(1, IN_FLIGHT_ATTEMPTS + 1):
        streams = streams_to(client, target, workers, prompt, budget)
        try:
            sent = started_in_flight(verdict, streams, replaceable=attempt < IN_FLIGHT_ATTEMPTS)
        except BaseException:
            for stream in streams:
                stream.wait()
            raise
        if sent is not None:
            break
        for stream in streams:  # ended or ending: none overlaps the next set
            stream.wait()
    assert sent is not None  # the last set is never replaced
    own = AnswerMarks(workers, streams)
    try:
        with paused(verdict, admin, chosen, mode, on_answer=own.on_answer):
            answered = own.marks()
            wait_all(streams, watched_s / 2)
            settled = [stream.mark() for stream in streams]
            wait_all(streams, watched_s / 2)
            at_resume = [stream.mark() for stream in streams]
    finally:
        for stream in streams:
            stream.wait()
    return [
        (worker, _crossing(verdict, mode, stream, marks))
        for worker, stream, *marks in zip(
            workers, streams, sent, answered, settled, at_resume, strict=True
        )
    ]


def started_in_flight(
    verdict: Verdict, streams: list[InFlightStream], *, replaceable: bool
) -> list[Mark] | None:
    """Start `streams`, each once the one before delivered its first token, let each show its
    pace, and return what each had delivered then: the marks a control step is sent on. None,
    with `replaceable`, when one had already ended (`EndedBeforeStep`, or ended while showing
    its pace): that set cannot be in flight at the step."""
    try:
        for stream in streams:
            stream.start_and_wait_first_token(verdict)
    except EndedBeforeStep:
        if replaceable:
            return None
        raise
    for stream in streams:
        stream.show_pace()
    sent = [stream.mark() for stream in streams]
    if replaceable and any(mark.ended for mark in sent):
        return None
    return sent


class AnswerMarks:
    """Each stream as it stood when its own worker's pause answered (`on_answer`, given to the
    pause's fan-out): a stream pinned to a worker answered early is not read late because
    another worker answered later. An unpinned stream is read once they all had."""

    def __init__(
        self, workers: tuple[AdminWorker | None, ...], streams: list[InFlightStream]
    ) -> None:
        self.workers = workers
        self.streams = streams
        self._own: dict[int, Mark] = {}

    def on_answer(self, answered_by: AdminWorker) -> None:
        for index, worker in enumerate(self.workers):
            if worker == answered_by:
                self._own[index] = self.streams[index].mark()

    def marks(self) -> list[Mark]:
        return [self._own.get(index) or stream.mark() for index, stream in enumerate(self.streams)]


def streams_to(
    client: Client,
    target: Target,
    workers: tuple[AdminWorker | None, ...],
    prompt: list[int],
    max_tokens: int,
    *,
    native: bool = False,
) -> list[InFlightStream]:
    """One stream per worker, pinned to it (unpinned for None), not yet started."""
    return [
        InFlightStream(
            client,
            target,
            prompt,
            instance_id=None if worker is None else worker.instance_id,
            max_tokens=max_tokens,
            native=native,
        )
        for worker in workers
    ]


def wait_all(streams: list[InFlightStream], seconds: float) -> None:
    """Wait up to `seconds` in all (less when every stream has ended)."""
    started = time.monotonic()
    for stream in streams:
        stream.wait(max(0.0, seconds - (time.monotonic() - started)))


def _crossing(verdict: Verdict, mode: str, stream: InFlightStream, marks: list[Mark]) -> Crossing:
    sent, answered, settled, at_resume = marks
    held = 0 if settled.ended else at_resume.tokens - settled.tokens
    ending = terminal.ending_from_fold(verdict.folded(stream.exchange))
    return Crossing(
        mode=mode,
        max_tokens=stream.max_tokens,
        sent=sent.tokens,
        answered=answered.tokens,
        ended_by_answer=answered.ended,
        at_resume=at_resume.tokens,
        ended_by_resume=at_resume.ended,
        final=stream.mark().tokens,
        completed=stream.completed(),
        read_late=stream.maybe_read_late(sent, answered, at_resume),
        watched_s=at_resume.at - answered.at,
        while_held=0 if stream.outpaced(sent, settled, at_resume) else held,
        finish_reason=ending.finish_reason,
        detailed_finish_reason=ending.detailed_finish_reason,
    )


def ended_native_crossing(
    mode: str, max_tokens: int, sent: int, answered: int, events: list[Any]
) -> Crossing:
    """A native SGLang stream that had ended by the time its pause answered, in output tokens:
    `sent` and `answered` count its events (each carries at least one token) when the pause was
    sent and answered."""
    counts = straddle.native_counts(events)

    def tokens(read: int) -> int:
        return counts[min(read, len(counts)) - 1] if read and counts else 0

    final = counts[-1] if counts else 0
    return Crossing(
        mode=mode,
        max_tokens=max_tokens,
        sent=tokens(sent),
        answered=tokens(answered),
        ended_by_answer=True,
        at_resume=tokens(answered),
        ended_by_resume=True,
        final=final,
        completed=final >= max_tokens,
        read_late=False,
        watched_s=0.0,
    )


@dataclass(frozen=True)
class Held:
    """A short generation sent to one worker once its pause answered."""

    worker: AdminWorker | None
    while_paused: int
    """Events it delivered before the resume was sent."""
    completed: bool
    exchange: Exchange


def held_generation(
    verdict: Verdict,
    client: Client,
    target: Target,
    admin: AdminClient,
    chosen: Selection,
    prompt: list[int],
    held_s: float,
    mode: str | None = None,
) -> list[Held]:
    """A short generation per selected worker (`each_worker.pins`), sent once the chosen
    workers' pause (in `mode`, else the family's refresh mode) answered: the events each
    delivered within `held_s` (read before the resume is sent), whether it went on after the
    resume, and its exchange; each terminal is held to the terminal-reason rules
    (`InFlightStream.judge_terminal`). A request the paused worker refused, or did not answer as
    a stream (the native sidecar answers 503 while paused), goes on if a generation sent to the
    same worker after the resume is served."""
    workers = pins(chosen)
    streams = streams_to(client, target, workers, prompt, PROBE_TOKENS)
    with paused(verdict, admin, chosen, mode):
        started = time.monotonic()
        for stream in streams:
            stream.thread.start()
        for stream in streams:
            stream.progress.wait_for_events(1, max(0.0, held_s - (time.monotonic() - started)))
        while_paused = [stream.progress.events for stream in streams]
    found = []
    for worker, stream, before in zip(workers, streams, while_paused, strict=True):
        stream.wait()
        stream.judge_terminal(verdict)
        completed = stream.progress.events > before
        exchange = stream.exchange
        if not completed and (
            exchange.status != 200 or "text/event-stream" not in exchange.content_type
        ):
            completed = pinned_generation(client, target, worker, prompt).status == 200
        found.append(Held(worker, before, completed, exchange))
    return found


def first_tokens_after(
    client: Client,
    target: Target,
    workers: tuple[AdminWorker | None, ...],
    prompt: list[int],
    what: str,
    wait_s: float,
) -> list[tuple[AfterResume, InFlightStream]]:
    """`first_token_after` on each of `workers` at once (`each_worker.pins`), every one timed
    from the same moment: the caller's step answered for all of them alike."""
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, len(workers))) as pool:
        return list(
            pool.map(
                lambda worker: first_token_after(
                    client, target, worker, prompt, what, wait_s, started
                ),
                workers,
            )
        )


def first_token_after(
    client: Client,
    target: Target,
    worker: AdminWorker | None,
    prompt: list[int],
    what: str,
    wait_s: float,
    started: float | None = None,
) -> tuple[AfterResume, InFlightStream]:
    """A short generation pinned to `worker`, sent right after `what` answered (at `started`,
    monotonic; now when not given): how long until a first token came (None if none within
    `wait_s`), and the stream, for the caller to wait for once the worker surely serves. A
    request refused before any token (a worker that registers again once resumed, and is not
    yet routed to) is sent again while the time lasts: what is measured is how long generation
    stayed unavailable."""
    started = time.monotonic() if started is None else started
    instance_id = None if worker is None else worker.instance_id
    while True:
        probe = InFlightStream(
            client, target, prompt, instance_id=instance_id, max_tokens=PROBE_TOKENS
        )
        probe.thread.start()
        left = wait_s - (time.monotonic() - started)
        came = probe.progress.wait_for_events(1, max(left, 0.0))
        took = time.monotonic() - started
        if came or not probe.progress.ended or took >= wait_s:
            return AfterResume(what, took if came else None, wait_s), probe
        probe.wait()
        time.sleep(RETRY_S)
