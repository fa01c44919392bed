"""The run's journal: no result is lost. Every test's record is appended, as the test finishes,
to `records.jsonl` in the report directory (one JSON line, flushed at once and fsync'd at most a
second later), after a first
line that says what the run set out to test; the targets as they were reached, and a last line
once the reports were written. A run killed outright (SIGKILL, the OOM killer, an evicted pod),
which writes no report, leaves what it observed there (a flushed line survives its process; the
fsync is for a machine that goes down, and costs the parallel run's parent too much to pay for
every line), and `rebuild` (`rl-conformance report
DIR`) makes the matrix from it, marked incomplete with the reason.

Lines, each a JSON object with a `kind`:

- `run`: the run's start, seed, command, environment, the capabilities selected and the targets
  planned (as placeholders), `--budget-generations`, `--record` facts;
- `target`: a target as it was reached (a later line for the same id supersedes an earlier one);
- `record`: one test's `TestRecord` (its evidence and wire logs inline), with the time it was
  written;
- `end`: the reports were written; whether the run was complete, and why not.

A line cut by the kill (the last one) is skipped and counted.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigurationError
from ..redaction import open_text
from . import capabilities as capability_registry
from .matrix import Matrix, RunInfo, TestRecord, build_matrix, environment, now
from .target import Target

JOURNAL = "records.jsonl"
FORMAT = 1
_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
SYNC_INTERVAL_S = 1.0
"""A line is fsync'd as it is written when the last fsync is at least this old; otherwise with a
later line or when the journal closes."""


def _at(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_TIME)


def _moment(text: str) -> datetime:
    for form in (_TIME, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, form).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"not a journal time: {text!r}")


class Journal:
    """Appends to `records.jsonl`; a line is with the operating system (flushed) when a call
    returns, and fsync'd within `SYNC_INTERVAL_S` of the next line or at `close`. A
    journal that cannot be written (a full disk) says so once on stderr and stops writing: the
    run goes on, its reports are still written at the end."""

    def __init__(self, path: Path, stream: IO[str]) -> None:
        self.path = path
        self._stream: IO[str] | None = stream
        self._targets: dict[str, dict[str, Any]] = {}
        self.records = 0
        self._line_open = False
        """A write was interrupted (Ctrl-C, --run-timeout) before its line ended."""
        self._synced_at = -SYNC_INTERVAL_S
        self._unsynced = False

    @classmethod
    def begin(
        cls,
        directory: Path,
        run: RunInfo,
        capability_ids: Iterable[str],
        targets: Iterable[Target],
    ) -> Journal:
        """A new journal (a previous run's in the same directory is replaced), its first line
        written."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / JOURNAL
        journal = cls(path, open_text(path))
        planned = {target.id: target.describe() for target in targets}
        journal._write(
            {
                "kind": "run",
                "format": FORMAT,
                "started_at": _at(run.started_at),
                "seed": run.seed,
                "command": list(run.command),
                "environment": environment(run),
                "capabilities": list(capability_ids),
                "targets": list(planned.values()),
                "budget_generations": run.budget_generations,
                "recorded": dict(run.recorded),
                "warnings": list(run.warnings),
            }
        )
        journal._targets = planned
        return journal

    def target(self, target: Target) -> None:
        """The target as reached; written again only when its description changed."""
        description = target.describe()
        if self._targets.get(target.id) != description:
            self._targets[target.id] = description
            self._write({"kind": "target", "target": description})

    def record(self, record: TestRecord) -> None:
        self.records += 1
        self._write({"kind": "record", "at": _at(now()), "record": record.to_json()})

    def end(self, run: RunInfo) -> None:
        """The reports of `run` were written."""
        self._write(
            {
                "kind": "end",
                "at": _at(run.finished_at),
                "complete": run.complete,
                "incomplete_reason": run.incomplete_reason,
            }
        )

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                if self._unsynced:
                    stream.flush()
                    os.fsync(stream.fileno())
            with contextlib.suppress(OSError):
                stream.close()

    def detach(self) -> None:
        """Forget the file without closing it (a forked child: the parent keeps writing it)."""
        self._stream = None

    def _write(self, document: dict[str, Any]) -> None:
        stream = self._stream
        if stream is None:
            return
        try:
            line = json.dumps(document, default=str) + "\n"
            if self._line_open:  # end the cut line: it stays unreadable, this one does not
                line = "\n" + line
            self._line_open = True
            stream.write(line)
            stream.flush()
            self._line_open = False
            self._unsynced = True
            if time.monotonic() - self._synced_at >= SYNC_INTERVAL_S:
                os.fsync(stream.fileno())
                self._synced_at = time.monotonic()
                self._unsynced = False
        except (OSError, ValueError) as exc:
            self._stream = None
            print(
                f"rl-conformance: the journal {self.path} cannot be written: {exc}", file=sys.stderr
            )


@dataclass
class JournalContents:
    header: dict[str, Any]
    targets: dict[str, dict[str, Any]] = field(default_factory=dict)
    records: list[TestRecord] = field(default_factory=list)
    end: dict[str, Any] | None = None
    last_at: datetime | None = None
    unreadable: int = 0
    """Lines that could not be read (a line cut by the kill)."""

    def add(self, record: TestRecord) -> None:
        """A record; one written again for the same test and target (amended: a worker's death
        charged to it later) replaces the first."""
        for position, found in enumerate(self.records):
            if found.nodeid == record.nodeid and found.target_id == record.target_id:
                self.records[position] = record
                return
        self.records.append(record)


def read(path: Path) -> JournalContents:
    """What a journal holds; raises `ConfigurationError` when `path` is not a run's journal."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise ConfigurationError(f"{path}: no journal of a run ({exc.strerror})") from exc
    contents: JournalContents | None = None
    unreadable = 0
    for line in lines:
        try:
            document = json.loads(line)
            kind = document["kind"]
        except (ValueError, TypeError, KeyError):
            unreadable += 1
            continue
        if kind == "run":
            contents = JournalContents(header=document)
            continue
        if contents is None:
            unreadable += 1
            continue
        try:
            if kind == "target":
                contents.targets[document["target"]["id"]] = document["target"]
            elif kind == "record":
                contents.add(TestRecord.from_json(document["record"]))
            elif kind == "end":
                contents.end = document
            if "at" in document:
                contents.last_at = _moment(document["at"])
        except (ValueError, TypeError, KeyError):
            unreadable += 1
    if contents is None:
        raise ConfigurationError(
            f"{path}: expected a run's journal (its first line of kind "
            f"'run'), observed none in {len(lines)} line(s)"
        )
    contents.unreadable = unreadable
    return contents


def rebuild(directory: Path) -> Matrix:
    """The matrix of the run whose journal is in `directory`. A run that ended before writing
    its report (no `end` line) gives an incomplete matrix that says it was rebuilt and from how
    many records; the cells no record reached say so too."""
    contents = read(directory / JOURNAL)
    header = contents.header
    if header.get("format") != FORMAT:
        raise ConfigurationError(
            f"{directory / JOURNAL}: expected journal format {FORMAT}, observed "
            f"{header.get('format')!r}"
        )
    started = _moment(header["started_at"])
    end = contents.end
    if end is not None:
        complete = bool(end.get("complete"))
        reason = end.get("incomplete_reason") or (None if complete else "the run was interrupted")
    else:
        complete = False
        reason = (
            f"rebuilt from {len(contents.records)} test records: the run ended before its report"
        )
        if contents.unreadable:
            reason += f" ({contents.unreadable} unreadable line(s) left out)"
    finished = contents.last_at or started
    run = RunInfo(
        started_at=started,
        finished_at=max(finished, started),
        complete=complete,
        seed=header.get("seed"),
        incomplete_reason=None if complete else reason,
        command=list(header.get("command") or []),
        budget_generations=header.get("budget_generations"),
        recorded=dict(header.get("recorded") or {}),
        environment=dict(header.get("environment") or {}),
        warnings=tuple(header.get("warnings") or ()),
    )
    selected = [
        capability_registry.BY_ID[capability_id]
        for capability_id in header.get("capabilities", [])
        if capability_id in capability_registry.BY_ID
    ]
    planned = {document["id"]: document for document in header.get("targets", [])}
    planned.update(contents.targets)
    targets = [Target.from_description(document) for document in planned.values()]
    return build_matrix(selected, targets, contents.records, run)
