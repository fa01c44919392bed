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


def default_jobs(most: int) -> int:
    """Twice the machine's cores, at most `most`: a shard mostly waits on the network."""
    return min(2 * (os.cpu_count() or 1), most)


def shard_directory(report: Path, index: int) -> Path:
    return report / "shards" / str(index)


def run_shards(
    command: str,
    arguments: Sequence[Sequence[str]],
    report: Path,
    report_name: str,
    timeout_s: float = TIMEOUT_S,
    *,
    progress_every_s: float = PROGRESS_EVERY_S,
) -> list[dict[str, Any]] | None:
    """`rl-conformance COMMAND ARGS... --report-dir shards/<i>` for each ARGS at once; each
    shard's `report_name`, in order, or None after saying which shard wrote none and why. While
    they run, a progress line on stderr (shards done, tests and targets recorded so far in the
    shards' journals, time) whenever it changes, at most every `progress_every_s`."""
    with contextlib.ExitStack() as stack:
        errors = [stack.enter_context(tempfile.TemporaryFile(mode="w+")) for _ in arguments]
        said = _run_all(command, arguments, report, errors, timeout_s, progress_every_s)
    return _reports(command, said, report, report_name)


def _run_all(
    command: str,
    arguments: Sequence[Sequence[str]],
    report: Path,
    errors: list[Any],
    timeout_s: float,
    progress_every_s: float,
) -> list[tuple[int | None, str]]:
    """Start every shard, show progress until all ended (or the deadline killed them); each
    shard's exit status and what it said on stderr."""
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rl_conformance",
                command,
                *shard_arguments,
                "--report-dir",
                str(shard_directory(report, index)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=errors[index],
            text=True,
        )
        for index, shard_arguments in enumerate(arguments)
    ]
    started = time.monotonic()
    deadline = started + timeout_s
    shown = ""
    while any(process.poll() is None for process in processes):
        if time.monotonic() >= deadline:
            for process, handle in zip(processes, errors, strict=True):
                if process.poll() is None:
                    process.kill()
                    process.wait()
                    handle.seek(0, os.SEEK_END)
                    handle.write(f" (did not finish within {timeout_s:.0f} s)")
            break
        time.sleep(min(progress_every_s, max(0.1, deadline - time.monotonic())))
        line = _progress(command, processes, report, time.monotonic() - started)
        if line != shown:
            print(line, file=sys.stderr, flush=True)
            shown = line
    said = []
    for process, handle in zip(processes, errors, strict=True):
        handle.seek(0)
        said.append((process.returncode, handle.read()))
    return said


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
    command: str, processes: list[subprocess.Popen[str]], report: Path, spent: float
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
        f"[{command}] {done}/{len(processes)} shards done; {targets} targets reached, "
        f"{tests} tests recorded ({spent:.0f} s)"
    )
