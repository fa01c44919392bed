"""A pause sent to observe a stream in flight is sent only with streams still open: a set that a
real engine ran to its end before the harness could act (its first token read late, the rest in
the same burst) is replaced, up to `IN_FLIGHT_ATTEMPTS` sets, and the last set is paused
whatever it holds (its crossing then says it ran to its end). Each stream is started with a way
to tell from its worker's counters that it is being generated."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from rl_conformance.control import pause_probes
from rl_conformance.control.inflight import EndedBeforeStep, Mark
from rl_conformance.control.worker_meter import WorkerMeter


class Stream:
    """What `crossings` reads of an `InFlightStream`: `ended_at_first` ends it before its first
    token was read, `ended_after_first` right after (while the set's other streams started)."""

    def __init__(self, *, ended_at_first: bool = False, ended_after_first: bool = False) -> None:
        self.ended_at_first = ended_at_first
        self.ended_after_first = ended_after_first
        self.tokens = 0
        self.ended = False
        self.started = False
        self.waited = False
        self.generating: Any = "never started"
        self.exchange = None

    def start_and_wait_first_token(self, verdict: Any, generating: Any = None) -> Mark:
        self.started = True
        self.generating = generating
        self.tokens = 512 if self.ended_at_first else 3
        self.ended = self.ended_at_first
        if self.ended:
            raise EndedBeforeStep("ended before the control step could be sent")
        mark = self.mark()
        if self.ended_after_first:
            self.tokens, self.ended = 512, True
        else:
            self.tokens = 20
        return mark

    def mark(self) -> Mark:
        return Mark(self.tokens, self.ended)

    def wait(self, seconds: float = 0.0) -> bool:
        self.waited = True
        return True


class Meter(WorkerMeter):
    """A worker's counters that grow by 10 at each read."""

    def __init__(self, client: Any, workers: Any) -> None:
        super().__init__(client, workers)
        self.unit = "generated tokens"
        self.reads = 0

    def read(self) -> float:
        self.reads += 1
        return 10.0 * self.reads


@pytest.fixture
def sets(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[Stream]]]:
    """The sets of streams `crossings` is given, in turn (the test appends them); the pause and
    the verdict's reading are stubs, each crossing the counts of its marks: which set was paused
    shows in them. Every stream started was waited for before the test ended."""
    planned: list[list[Stream]] = []
    given: list[list[Stream]] = []

    def streams_to(*args: Any) -> list[Stream]:
        given.append(planned.pop(0))
        return given[-1]

    @contextlib.contextmanager
    def paused(*args: Any, **kwargs: Any) -> Iterator[None]:
        yield

    monkeypatch.setattr(pause_probes, "streams_to", streams_to)
    monkeypatch.setattr(pause_probes, "paused", paused)
    monkeypatch.setattr(pause_probes, "pins", lambda chosen: (None,))
    monkeypatch.setattr(pause_probes, "in_flight_budget", lambda *args: 512)
    monkeypatch.setattr(pause_probes, "wait_all", lambda streams, seconds: None)
    monkeypatch.setattr(pause_probes, "WorkerMeter", Meter)
    monkeypatch.setattr(
        pause_probes,
        "_crossing",
        lambda verdict, mode, stream, marks, generated: [m.tokens for m in marks],
    )
    yield planned
    assert all(stream.waited for group in given for stream in group if stream.started)


def cross() -> list[Any]:
    chosen = SimpleNamespace(workers=(), target=None)
    found = pause_probes.crossings(None, None, None, None, chosen, "keep", [1], 1.0)  # type: ignore[arg-type]
    return [crossing for _, crossing, _ in found]


def test_a_set_that_ended_before_the_step_is_replaced_and_the_open_one_is_paused(
    sets: list[list[Stream]],
) -> None:
    early, after_first, open_one = (
        Stream(ended_at_first=True),
        Stream(ended_after_first=True),
        Stream(),
    )
    sets += [[early], [after_first], [open_one]]
    crossing = cross()
    assert crossing == [[20, 20, 20]]  # sent with the open set: 20 tokens, not 512
    assert early.waited and after_first.waited and open_one.started
    assert callable(open_one.generating) and open_one.generating()  # its worker's counters grew


def test_the_last_set_is_paused_whatever_it_holds(sets: list[list[Stream]]) -> None:
    assert pause_probes.IN_FLIGHT_ATTEMPTS == 3
    sets += [[Stream(ended_after_first=True)] for _ in range(3)]
    assert cross() == [[512, 512, 512]]  # the crossing says it ran to its end


def test_a_set_ending_before_its_first_token_every_time_stays_unobservable(
    sets: list[list[Stream]],
) -> None:
    sets += [[Stream(ended_at_first=True)] for _ in range(3)]
    with pytest.raises(EndedBeforeStep):
        cross()


class Broke(Exception):
    """Anything but `EndedBeforeStep`: a check of the stream that failed, a refused request."""


def test_a_failure_is_never_retried(sets: list[list[Stream]]) -> None:
    """A stream that broke fails at once: only a faithful stream that was simply over is
    replaced."""
    broken = Stream()

    def fail(verdict: Any, generating: Any = None) -> Mark:
        broken.started = True
        raise Broke("the stream broke")

    broken.start_and_wait_first_token = fail  # type: ignore[method-assign]
    sets += [[broken], [Stream()]]
    with pytest.raises(Broke):
        cross()
    assert broken.waited
