"""How a run is stopped from outside its tests: the run timer (`--run-timeout`) and SIGINT or
SIGTERM, each interrupting the main thread as Ctrl-C does and naming itself as the run's stop
reason, so the matrix is still written, marked incomplete."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from ..model import exits, stops
from .state import RunState


def start_run_timer(state: RunState, seconds: float) -> threading.Timer | None:
    """SIGINT to the main thread after `seconds`: whatever it waits on (a request, a launch)
    is interrupted as by Ctrl-C, and the matrix is still written, marked incomplete."""
    if threading.current_thread() is not threading.main_thread():
        return None
    main = threading.main_thread().ident
    assert main is not None

    def expire() -> None:
        state.incomplete_reason = timeout_reason(state.config.run_timeout or seconds)
        signal.pthread_kill(main, signal.SIGINT)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def timeout_reason(seconds: float | None) -> str:
    return f"{exits.TIMEOUT_PREFIX} the run was stopped after {seconds or 0:g} s"


STOP_SIGNALS: dict[int, str] = {
    signal.SIGINT: exits.SIGINT_REASON,
    signal.SIGTERM: exits.SIGTERM_REASON,
}


def install_stop_signals(state: RunState) -> Callable[[], None]:
    """SIGINT and SIGTERM end the run the same way (`model.stops`: the first interrupts the
    run, later ones only wait for it to end), each naming itself as the run's stop reason
    (unless a reason came first: the run timer's SIGINT), so the report is still written,
    marked incomplete, and the exit status says which (`exits.for_stop`). Returns what puts
    the previous handlers back."""

    def note(signum: int) -> None:
        state.incomplete_reason = state.incomplete_reason or STOP_SIGNALS[signum]

    previous = stops.install()
    remove = stops.listen(note)

    def restore() -> None:
        remove()
        stops.restore(previous)

    return restore
