"""A process's stop signals (`model.stops`): the first interrupts, later ones and those that
come while the process is ending are only noted, and each is remembered for the exit status."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from rl_conformance.model import stops


@pytest.fixture
def installed() -> Iterator[None]:
    previous = stops.install()
    assert previous, "the test process must not have the handler already"
    try:
        yield
    finally:
        stops.restore(previous)


def deliver(signum: int = signal.SIGINT) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.01)  # the handler runs in this thread at the next instruction


def test_the_first_stop_interrupts_and_later_ones_are_noted(installed: None) -> None:
    with pytest.raises(KeyboardInterrupt):
        deliver()
    deliver(signal.SIGTERM)  # noted, not raised: the first stop's cleanup runs whole
    assert stops.received() == signal.SIGINT
    assert stops.exit_status() == 130


def test_a_stop_while_ending_is_noted_only(installed: None) -> None:
    heard: list[int] = []
    remove = stops.listen(heard.append)
    with stops.ending():
        deliver(signal.SIGTERM)
    remove()
    deliver()  # the first was noted while ending: this one is a later one, noted too
    assert heard == [signal.SIGTERM]
    assert stops.exit_status() == 143


def test_installing_again_keeps_what_was_received(installed: None) -> None:
    with pytest.raises(KeyboardInterrupt):
        deliver()
    assert stops.install() == {}
    assert stops.received() == signal.SIGINT


def test_nothing_received_says_nothing(installed: None) -> None:
    assert stops.received() is None and stops.exit_status() is None
