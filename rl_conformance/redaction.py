"""No secret is ever written: every byte a run writes or prints passes through one redactor.

A credential is registered here the moment it is read (a `--header` value, a token read from a
file or an environment variable, a query parameter the user marks secret), together with its
*reference*: a shell expression that yields it (`$DYNAMO_TOKEN`, `$(cat '/run/secrets/token')`,
`$FRONTEND_X_API_KEY`). Wherever it would appear, its reference appears instead, so a report is
readable and a `curl` reproducer still replays once the variable is set.

The redactor is applied where bytes leave the process: `write_text` and `open_text` for every
file a run writes (reports, wire logs, cells, the journal, the validation records, the bundle),
`console` for standard output and error (the console, warnings, tracebacks). The requests the
client records already carry references (`model.credentials`); this is the net under everything
else: a server that echoes a token in an error body, an exception that quotes a URL, a command
line recorded as given.

It is process-wide on purpose: a secret read in one place must be hidden from every writer of
the process, the standard streams included, and a forked child inherits what its parent knew.
Values shorter than `MIN_CHARS` are replaced only where the harness knows them to be credentials
(the recorded requests): searched for in free text they would match ordinary words.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
import shlex
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, quote_plus

MIN_CHARS = 8
QUERY_PLACEHOLDER = "[redacted]"
"""What stands for the value of a query parameter marked secret whose value was never
registered (a URL some server wrote)."""


def _forms(value: str) -> set[str]:
    """The ways a value is spelled in what a run writes: as is, inside JSON, HTML or XML,
    percent-encoded, and inside a shell-quoted word."""
    return {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        html.escape(value),
        html.escape(value, quote=False),
        html.escape(value, quote=False).replace('"', "&quot;"),
        quote(value, safe=""),
        quote_plus(value, safe=""),
        value.replace("'", "'\"'\"'"),
    }


class Redactor:
    """The registry of secrets and the one function that hides them (`redact`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replacements: dict[str, str] = {}
        self._references: dict[str, str] = {}
        """Reference -> the value it yields (for a replay that must send it)."""
        self._query_names: set[str] = set()
        self._values: re.Pattern[str] | None = None
        self._query: re.Pattern[str] | None = None

    def add(self, value: str, reference: str) -> str:
        """Register `value`, shown as `reference` from now on; returns the reference. A value
        registered twice keeps its first reference."""
        with self._lock:
            self._references.setdefault(reference, value)
            if len(value) >= MIN_CHARS:
                for form in _forms(value):
                    self._replacements.setdefault(form, reference)
                self._values = re.compile(
                    "|".join(map(re.escape, sorted(self._replacements, key=len, reverse=True)))
                )
        return reference

    def mark_query_parameter(self, name: str) -> None:
        """Hide the value of every `name=` query parameter of any URL written, known or not."""
        with self._lock:
            self._query_names.add(name)
            names = "|".join(map(re.escape, sorted(self._query_names, key=len, reverse=True)))
            self._query = re.compile(rf"([?&;](?:{names})=)([^&#\s\"'<>\\]+)")

    @property
    def active(self) -> bool:
        return self._values is not None or self._query is not None

    def references(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._references)

    def redact(self, text: str) -> str:
        """`text` with every registered secret replaced by its reference."""
        values, query = self._values, self._query
        if values is not None:
            replacements = self._replacements
            text = values.sub(lambda found: replacements[found.group(0)], text)
        if query is not None:
            text = query.sub(self._query_value, text)
        return text

    def _query_value(self, found: re.Match[str]) -> str:
        value = found.group(2)
        return found.group(1) + (value if value in self._references else QUERY_PLACEHOLDER)

    def redact_bytes(self, data: bytes) -> bytes:
        if not self.active:
            return data
        return self.redact(data.decode("utf-8", "surrogateescape")).encode(
            "utf-8", "surrogateescape"
        )

    def resolve(self, text: str) -> str:
        """`text` with every reference replaced by the value it stands for: only for a request
        about to be sent (a reproducer replayed), never for anything written."""
        with self._lock:
            references = sorted(self._references, key=len, reverse=True)
        for reference in references:
            text = text.replace(reference, self._references[reference])
        return text

    def holds_reference(self, text: str) -> bool:
        return any(reference in text for reference in self.references())

    def shell_word(self, text: str) -> str:
        """`text` quoted for a POSIX shell, its references left for the shell to expand
        (`"Authorization: Bearer $DYNAMO_TOKEN"`); without one, as `shlex.quote` quotes it."""
        references = [r for r in self.references() if r in text]
        if not references:
            return shlex.quote(text)
        pattern = "(" + "|".join(map(re.escape, sorted(references, key=len, reverse=True))) + ")"
        pieces = re.split(pattern, text)
        literal = "".join(pieces[0::2])
        if "!" not in literal:
            escaped = [
                re.sub(r'(["\\$`])', r"\\\1", piece) if index % 2 == 0 else piece
                for index, piece in enumerate(pieces)
            ]
            return '"' + "".join(escaped) + '"'
        return "".join(  # `!` would be history expansion inside double quotes
            (shlex.quote(piece) if index % 2 == 0 else f'"{piece}"')
            for index, piece in enumerate(pieces)
            if piece
        )

    def forget(self) -> None:
        """Forget every secret (tests only: a process's run registers for good)."""
        with self._lock:
            self._replacements.clear()
            self._references.clear()
            self._query_names.clear()
            self._values = self._query = None


REDACTOR = Redactor()
redact = REDACTOR.redact


def write_text(path: Path, text: str) -> None:
    """Write a file of the run, redacted."""
    path.write_text(REDACTOR.redact(text), encoding="utf-8")


def write_bytes(path: Path, data: bytes) -> None:
    path.write_bytes(REDACTOR.redact_bytes(data))


class RedactingWriter:
    """A text stream that redacts what passes through it. A line is held until it ends (or the
    stream is flushed), so that a secret written in pieces is still seen whole."""

    def __init__(self, inner: IO[str]) -> None:
        self._inner = inner
        self._pending = ""
        self._lock = threading.Lock()

    @property
    def inner(self) -> IO[str]:
        return self._inner

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            cut = self._pending.rfind("\n") + 1
            if cut:
                ready, self._pending = self._pending[:cut], self._pending[cut:]
                self._inner.write(REDACTOR.redact(ready))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                pending, self._pending = self._pending, ""
                self._inner.write(REDACTOR.redact(pending))
        self._inner.flush()

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.flush()
        self._inner.close()

    def __enter__(self) -> RedactingWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, ...: the stream's
        if name == "buffer":  # bytes written there would not be redacted
            raise AttributeError(name)
        return getattr(self._inner, name)


def open_text(path: Path, mode: str = "w") -> RedactingWriter:
    """A file of the run opened for writing, redacted line by line."""
    return RedactingWriter(open(path, mode, encoding="utf-8"))


@contextlib.contextmanager
def console() -> Iterator[None]:
    """Standard output and error redacted while the block runs (and in any child forked in
    it); what was held is flushed when it ends."""
    saved = sys.stdout, sys.stderr
    sys.stdout = RedactingWriter(saved[0])  # type: ignore[assignment]
    sys.stderr = RedactingWriter(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        sys.stdout, sys.stderr = saved


__all__ = [
    "MIN_CHARS",
    "REDACTOR",
    "RedactingWriter",
    "Redactor",
    "console",
    "open_text",
    "redact",
    "write_bytes",
    "write_text",
]
