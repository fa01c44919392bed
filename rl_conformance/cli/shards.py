"""Running one command's work as shards in parallel processes, each writing its report under
`shards/<index>/`: the reports of those that wrote one, or the reason of the first that did not.
The kill matrix and the pass-through report use it; both mostly wait on the network."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TIMEOUT_S = 1800.0
PROGRESS_EVERY_S = 30.0


def default_jobs(most: int, per_core: int = 2) -> int:
    """`per_core` shards per core of the machine, at most `most`: a shard mostly waits on the
    network."""
    return min(per_core * (os.cpu_count() or 1), most)


def shard_directory(report: Path, index: int) -> Path:
    return report / "shards" / str(index)


def run_shards(
    command: str,
    arguments: Sequence[Sequence[str]],
    report: Path,
    report_name: str,
    timeout_s: float = TIMEOUT_S,
    *,
    at_once: int | None = None,
    progress_every_s: float = PROGRESS_EVERY_S,
) -> list[dict[str, Any]] | None:
    """`rl-conformance COMMAND ARGS... --report-dir shards/<i>` for each ARGS, at most `at_once`
    at a time (default: all), the next starting as soon as one ends, in the order given; each
    shard's `report_name`, in order, or None after saying which shard wrote none and why. While
    they run, a progress line on stderr (shards done, tests and targets recorded so far in the
    shards' journals, time) whenever it changes, at most every `progress_every_s`."""
    with contextlib.ExitStack() as stack:
        errors = [stack.enter_context(tempfile.TemporaryFile(mode="w+")) for _ in arguments]
        pool = _Pool(command, arguments, report, errors, at_once or len(arguments))
        said = pool.run(timeout_s, progress_every_s)
    return _reports(command, said, report, report_name)


class _Pool:
    """The shards' processes: started in order, at most `at_once` running."""

    def __init__(
        self,
        command: str,
        arguments: Sequence[Sequence[str]],
        report: Path,
        errors: list[Any],
        at_once: int,
        program: Sequence[str] = (sys.executable, "-m", "rl_conformance"),
    ) -> None:
        self.program = tuple(program)
        self.command = command
        self.arguments = arguments
        self.report = report
        self.errors = errors
        self.at_once = max(1, at_once)
        self.processes: list[subprocess.Popen[str]] = []
        self._last_progress_at = 0.0

    def run(self, timeout_s: float, progress_every_s: float) -> list[tuple[int | None, str]]:
        """Until every shard ended (or the deadline killed those left, and those never started
        say so); each shard's exit status and what it said on stderr."""
        started = time.monotonic()
        deadline = started + timeout_s
        shown = ""
        try:
            self._start_more()
            while self._running() or len(self.processes) < len(self.arguments):
                if time.monotonic() >= deadline:
                    self._stop_all(f"did not finish within {timeout_s:.0f} s")
                    break
                time.sleep(min(progress_every_s, 0.5, max(0.1, deadline - time.monotonic())))
                self._start_more()
                line = self._progress(time.monotonic() - started, progress_every_s)
                if line is not None and line != shown:
                    print(line, file=sys.stderr, flush=True)
                    shown = line
        except BaseException:  # interrupted: no shard outlives the command that started it
            self._stop_all("were interrupted")
            raise
        said: list[tuple[int | None, str]] = []
        for index, handle in enumerate(self.errors):
            handle.seek(0)
            status = self.processes[index].returncode if index < len(self.processes) else None
            said.append((status, handle.read()))
        return said

    def _running(self) -> int:
        return sum(process.poll() is None for process in self.processes)

    def _start_more(self) -> None:
        while len(self.processes) < len(self.arguments) and self._running() < self.at_once:
            index = len(self.processes)
            self.processes.append(
                subprocess.Popen(
                    [
                        *self.program,
                        self.command,
                        *self.arguments[index],
                        "--report-dir",
                        str(shard_directory(self.report, index)),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=self.errors[index],
                    text=True,
                )
            )

    def _stop_all(self, why: str) -> None:
        """Kill every shard still running and say why in its stderr; those never started say
        so."""
        for index, handle in enumerate(self.errors):
            handle.seek(0, os.SEEK_END)
            if index >= len(self.processes):
                handle.write(f"never started: the shards {why}")
                continue
            process = self.processes[index]
            if process.poll() is None:
                process.kill()
                process.wait()
                handle.write(f" ({why})")

    def _progress(self, spent: float, every_s: float) -> str | None:
        if spent - self._last_progress_at < every_s and self._running():
            return None
        self._last_progress_at = spent
        return _progress(self.command, self.processes, self.report, spent, len(self.arguments))


def _reports(
    command: str, said: list[tuple[int | None, str]], report: Path, report_name: str
) -> list[dict[str, Any]] | None:
    reports = []
    for index, (status, stderr) in enumerate(said):
        path = shard_directory(report, index) / report_name
        if not path.exists():
            print(
                f"rl-conformance: {command} shard {index + 1}/{len(said)} wrote no "
                f"{report_name} (exit {status}): {stderr.strip()[-2000:]}",
                file=sys.stderr,
            )
            return None
        reports.append(json.loads(path.read_text()))
    return reports


def _progress(
    command: str,
    processes: list[subprocess.Popen[str]],
    report: Path,
    spent: float,
    shards: int | None = None,
) -> str:
    done = sum(process.poll() is not None for process in processes)
    tests = targets = 0
    for index in range(len(processes)):
        journal = shard_directory(report, index) / "records.jsonl"
        try:
            text = journal.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        tests += text.count('"kind": "record"')
        targets += text.count('"kind": "target"')
    return (
        f"[{command}] {done}/{shards or len(processes)} shards done; {targets} targets reached, "
        f"{tests} tests recorded ({spent:.0f} s)"
    )
