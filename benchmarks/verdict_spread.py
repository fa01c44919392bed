"""Runs the mutating suite N times against one launched deployment (default: the real vLLM
column, `--launch dynamo-vllm`) and prints the spread of every cell's verdict, with each run's
wall time and the slowest tests. A verdict that changes from run to run is a defect of the suite
(it raced the engine's pace, or leaned on something the deployment does not promise).

Prints figures; asserts nothing. Needs `rl-conformance install-vllm` for the vLLM columns.
Usage: python benchmarks/verdict_spread.py [--runs 10] [--launch dynamo-vllm]
       [--capability ID ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path


def one_run(launch: str, capabilities: list[str], directory: Path) -> tuple[float, dict]:
    command = [
        sys.executable,
        "-m",
        "rl_conformance",
        "run",
        "-q",
        "--launch",
        launch,
        "--allow-mutations",
        "--all-workers",
        "--report-dir",
        str(directory),
    ]
    for capability in capabilities:
        command += ["--capability", capability]
    started = time.monotonic()
    subprocess.run(command, capture_output=True, text=True, timeout=3600, check=False)
    elapsed = time.monotonic() - started
    matrix_path = directory / "matrix.json"
    return elapsed, json.loads(matrix_path.read_text()) if matrix_path.exists() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--launch", default="dynamo-vllm")
    parser.add_argument("--capability", action="append", default=[])
    args = parser.parse_args()
    seen: dict[str, Counter[str]] = defaultdict(Counter)
    reasons: dict[tuple[str, str], str] = {}
    times = []
    with tempfile.TemporaryDirectory(prefix="verdict-spread-") as scratch:
        for index in range(args.runs):
            elapsed, matrix = one_run(args.launch, args.capability, Path(scratch) / str(index))
            times.append(elapsed)
            if not matrix:
                seen["(no matrix written)"]["error"] += 1
                print(f"run {index + 1:2d}: {elapsed:6.1f} s, no matrix", flush=True)
                continue
            (target,) = matrix["targets"]
            bad = []
            for row in matrix["capabilities"]:
                cell = row["cells"][target["id"]]
                seen[row["id"]][cell["outcome"]] += 1
                reasons.setdefault((row["id"], cell["outcome"]), cell["reason"][:160])
                if cell["outcome"] in ("fail", "error"):
                    bad.append(f"{row['id']}={cell['outcome']}")
            ready = next((n for n in target["notes"] if n.startswith("launch to ready")), "")
            print(
                f"run {index + 1:2d}: {elapsed:6.1f} s ({ready}), "
                f"{len(matrix['capabilities'])} cells, fail/error: {', '.join(bad) or 'none'}",
                flush=True,
            )
    changed = {key: counts for key, counts in seen.items() if len(counts) > 1}
    print(f"\nverdict spread over {args.runs} runs of --launch {args.launch}:")
    for capability, counts in sorted(seen.items()):
        spread = ", ".join(f"{outcome} x{count}" for outcome, count in counts.most_common())
        marker = "  <-- CHANGED" if capability in changed else ""
        print(f"  {capability:40s} {spread}{marker}")
        for outcome in counts:
            if outcome not in ("pass",):
                print(f"      {outcome}: {reasons.get((capability, outcome), '')}")
    ordered = sorted(times)
    print(
        f"\n{len(changed)} of {len(seen)} cells changed; run wall time median "
        f"{ordered[len(ordered) // 2]:.1f} s (min {ordered[0]:.1f}, max {ordered[-1]:.1f})"
    )


if __name__ == "__main__":
    main()
