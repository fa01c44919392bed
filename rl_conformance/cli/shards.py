"""Running one command's work as shards in parallel processes, each writing its report under
`shards/<index>/`: the reports of those that wrote one, or the reason of the first that did not.
The kill matrix and the pass-through report use it; both mostly wait on the network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TIMEOUT_S = 1800.0


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
) -> list[dict[str, Any]] | None:
    """`rl-conformance COMMAND ARGS... --report-dir shards/<i>` for each ARGS at once; each
    shard's `report_name`, in order, or None after saying which shard wrote none and why."""
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
            stderr=subprocess.PIPE,
            text=True,
        )
        for index, shard_arguments in enumerate(arguments)
    ]
    deadline = time.monotonic() + timeout_s
    errors: list[str] = []
    for process in processes:
        try:
            _, stderr = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
            stderr = f"did not finish within {timeout_s:.0f} s. {stderr}"
        errors.append(stderr)
    reports = []
    for index, (process, stderr) in enumerate(zip(processes, errors, strict=True)):
        path = shard_directory(report, index) / report_name
        if not path.exists():
            print(
                f"rl-conformance: {command} shard {index + 1}/{len(processes)} wrote no "
                f"{report_name} (exit {process.returncode}): {stderr.strip()[-2000:]}",
                file=sys.stderr,
            )
            return None
        reports.append(json.loads(path.read_text()))
    return reports
