"""Running `rl-conformance certify-adapter` as a user does, for the certification self-tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_cli(directory: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """One quiet run writing to `directory`, as the user sees it."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "certify-adapter",
            "-q",
            "--report-dir",
            str(directory),
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )


def certify(directory: Path, *arguments: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """Exit status, matrix.json and every audit log of one quiet run writing to `directory`."""
    done = run_cli(directory, *arguments)
    assert (directory / "matrix.json").exists(), done.stderr[-3000:]
    audits = [json.loads(p.read_text()) for p in sorted((directory / "audit").glob("*.json"))]
    return done.returncode, json.loads((directory / "matrix.json").read_text()), audits
