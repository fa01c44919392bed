"""One report directory holds one run. A run into a directory that already holds a report would
leave the previous run's files beside its own (validation records, cells, logs), and the new
bundle would attest them; so such a directory is refused unless the user asks to replace it
(`--overwrite`), and replacing it clears it first. A directory holding files no run wrote is
never cleared: the flag may name the wrong place."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import ConfigurationError

WRITTEN = frozenset(
    {
        "matrix.json",
        "matrix.md",
        "matrix.html",
        "junit.xml",
        "bundle.json",
        "plan.json",
        "records.jsonl",
        "kill-matrix.json",
        "kill-matrix.md",
        "passthrough.json",
        "passthrough.md",
        "runs",
        "audit",
        "cells",
        "evidence",
        "logs",
        "validation",
        "wire",
        "shards",
        ".hypothesis",
    }
)
"""What a run writes at the top of its report directory."""
MARKERS = (
    "matrix.json",
    "bundle.json",
    "records.jsonl",
    "plan.json",
    "kill-matrix.json",
    "passthrough.json",
)
"""Any of these says a run wrote the directory."""


def claim(directory: Path, *, overwrite: bool, flag: str = "--report-dir") -> None:
    """Make `directory` this run's: absent or empty, or (with `overwrite`) a previous run's
    report, cleared. Raise `ConfigurationError` naming the way out otherwise."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise ConfigurationError(f"{flag} {directory}: expected a directory, observed a file")
    entries = sorted(entry.name for entry in directory.iterdir())
    if not entries:
        return
    strangers = [name for name in entries if name not in WRITTEN]
    if strangers or not any(marker in entries for marker in MARKERS):
        shown = ", ".join((strangers or entries)[:5])
        raise ConfigurationError(
            f"{flag} {directory}: expected an empty or new directory, observed files no run "
            f"wrote ({shown}); choose another {flag}"
        )
    if not overwrite:
        raise ConfigurationError(
            f"{flag} {directory} already holds a run's report: give --overwrite to replace it, "
            f"or another {flag} (one directory holds one run, so its bundle attests only "
            "what that run wrote)"
        )
    for name in entries:
        path = directory / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
