"""A process's stop signals (SIGINT: Ctrl-C; SIGTERM), with one handler for the whole process.

The first stop interrupts what the main thread is doing (`KeyboardInterrupt`), so the run ends
the way Ctrl-C ends it: its cleanups run and its report is written, marked incomplete. Every
later stop is only noted, so the stop the first began (fixtures restoring workers, the reports,
the launchers' stops) runs to its end instead of being cut in turn. While the process is ending
(`ending()`: writing its reports, stopping what it started) even the first is only noted. Either
way `received()` says which signal came first, for the exit status (130 or 143).

Standard library only: the command installs the handler before it imports anything else."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_STATUS: dict[int, int] = {signal.SIGINT: 130, signal.SIGTERM: 143}
"""As the shells count a process a signal ended: 128 + the signal's number."""


AGAIN_AFTER_S = 0.01


class _Stops:
    def __init__(self) -> None:
        self.received: list[int] = []
        self.ending = 0
        self.listeners: list[Callable[[int], None]] = []
        self.again = False
        """The first stop's interrupt was lost: the next one raises it."""
        self.unraisable_hook: Any = None


_stops = _Stops()


def _on_stop(signum: int, frame: object) -> None:
    first = not _stops.received
    _stops.received.append(signum)
    for listener in list(_stops.listeners):
        listener(signum)
    if (first or _stops.again) and not _stops.ending:
        _stops.again = False
        raise KeyboardInterrupt(f"signal {signum}")


def _on_unraisable(unraisable: Any) -> None:
    """A stop that landed where an exception cannot rise (a callback from C: a fork handler, a
    finaliser) would be lost, and said as "Exception ignored in ...": it is sent again to the
    main thread instead, a moment later, where it interrupts as it should have."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and _stops.received:
        _stops.again = True
        main = threading.main_thread().ident
        if main is not None:
            threading.Timer(AGAIN_AFTER_S, signal.pthread_kill, (main, _stops.received[0])).start()
        return
    (_stops.unraisable_hook or sys.__unraisablehook__)(unraisable)


def install() -> dict[int, Any]:
    """This module's handler for SIGINT and SIGTERM (from the main thread only). Returns the
    handlers it replaced, for `restore`; nothing when it is already installed (the command
    installed it first), and then what was received so far is kept."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    if signal.getsignal(signal.SIGINT) is _on_stop:
        return {}
    _stops.received.clear()
    _stops.ending = 0
    _stops.again = False
    _stops.unraisable_hook = sys.unraisablehook
    sys.unraisablehook = _on_unraisable
    return {signum: signal.signal(signum, _on_stop) for signum in STOP_SIGNALS}


def restore(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        if handler is not None:
            signal.signal(signum, handler)
    if previous and sys.unraisablehook is _on_unraisable:
        sys.unraisablehook = _stops.unraisable_hook or sys.__unraisablehook__


def listen(listener: Callable[[int], None]) -> Callable[[], None]:
    """Call `listener(signum)` on every stop signal (from the handler, in the main thread);
    returns what removes it."""
    _stops.listeners.append(listener)

    def remove() -> None:
        with contextlib.suppress(ValueError):
            _stops.listeners.remove(listener)

    return remove


@contextlib.contextmanager
def ending() -> Iterator[None]:
    """The process is ending: a stop signal meanwhile is noted, never raised, so what runs
    here (writing the reports, stopping deployments) runs whole."""
    _stops.ending += 1
    try:
        yield
    finally:
        _stops.ending -= 1


def now_ending() -> None:
    """The process is ending, for good: every stop signal from now on is noted only."""
    _stops.ending += 1


def received() -> int | None:
    """The first stop signal the process received since the handler was installed, if any."""
    return _stops.received[0] if _stops.received else None


def exit_status() -> int | None:
    """130 or 143 by the first stop signal received; None when none was."""
    first = received()
    return None if first is None else EXIT_STATUS[first]
