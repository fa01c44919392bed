"""How the `rl-conformance` process ends, whatever the instant: a stop signal (Ctrl-C, SIGTERM)
ends it with 130 or 143 and one line, never a traceback (`model.stops`: the first stop
interrupts, later ones wait for it); a standard stream whose reader went away (`| head`) is
written to no more, quietly, and the command ends with 141, as a command-line tool that
SIGPIPE ended does. A run whose output pipe closed still finishes and writes its report.

Imports only the standard library and `model.stops`: it is set up before anything else loads."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO

from ..model import stops

EXIT_CLOSED_PIPE = 141
"""128 + SIGPIPE (13): what a shell reports for `yes | head -1`'s `yes`."""
STOP_STATUSES = frozenset({124, *stops.EXIT_STATUS.values()})
"""A stop the command's own status already says (124: `--run-timeout`, 130, 143)."""


class QuietPipe:
    """A standard stream that, once its reader has gone (EPIPE), writes to /dev/null: the
    rest of the output is dropped without an error, and the command learns it ended so."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self.drop()
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self.drop()
            self._stream.flush()  # what the closed pipe refused goes to /dev/null

    def drop(self) -> None:
        """From now on, write to /dev/null (the stream's buffered text too)."""
        self.reader_gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard() -> None:
    """The process's stop signals and its quiet standard streams: first thing, before any
    import that takes time."""
    stops.install()
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, QuietPipe):
            setattr(sys, name, QuietPipe(stream))


def reader_gone() -> bool:
    return any(
        isinstance(stream, QuietPipe) and stream.reader_gone for stream in (sys.stdout, sys.stderr)
    )


def closed_pipe() -> None:
    """A `BrokenPipeError` that reached the top (a write around the quiet streams): every
    further write of the process goes to /dev/null."""
    stream = sys.stdout
    if isinstance(stream, QuietPipe):
        stream.drop()
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
    finally:
        os.close(devnull)


def final_status(code: int, *, pipe_closed: bool = False, said: bool = False) -> int:
    """The process's exit status: a stop signal's (130, 143) unless the command already said
    it was stopped, then a closed pipe's (141), else the command's. With `said`, a stop the
    command did not say (it came as the command ended) is said here, in one line."""
    stopped = stops.exit_status()
    if stopped is not None and code not in STOP_STATUSES:
        if said:
            print(
                f"rl-conformance: interrupted as it ended (exit {stopped}); what it wrote "
                "before is whole",
                file=sys.stderr,
            )
        return stopped
    if (pipe_closed or reader_gone()) and code not in STOP_STATUSES:
        return EXIT_CLOSED_PIPE
    return code


def flush_quietly() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
