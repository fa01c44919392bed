"""What a mutating night costs as the fleet grows: a fake vLLM deployment with 2, 8, 32 and 64
workers (each engine call `--engine-call-delay-ms`, default 50, as a real engine's pause or
update takes), run by URL as a user's fleet is (`--allow-mutations --all-workers`, two
`--update-model-path`), and for each the run's wall time and the generation requests it sent
(matrix.json `tests[].generations`, what `--budget-generations` caps), with the ratios of the
largest fleet to the smallest. Fleets are run in turn within each round, so load from
elsewhere hits them alike; the figures are medians over the rounds.

Extra arguments after `--` go to every run (`-- --judge-every-worker`: the cost of judging
every worker rather than the sample).

Prints figures; asserts nothing. Usage: python benchmarks/fleet_cost.py [--repeat N]
[--sizes 2,8,32,64] [-- RUN_FLAGS...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rl_conformance.launchers import FakeLauncher

CHECKPOINTS = ("--update-model-path", "/checkpoints/a", "--update-model-path", "/checkpoints/b")


def generations(matrix: dict[str, Any]) -> int:
    """The generation requests the run sent its one target (each test's `generations`, what
    `--budget-generations` caps)."""
    sent = {
        test["nodeid"]: int(test.get("generations", 0))
        for row in matrix["capabilities"]
        for cell in row["cells"].values()
        for test in cell.get("tests", [])
    }
    return sum(sent.values())


def outcomes(matrix: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in matrix["capabilities"]:
        for cell in row["cells"].values():
            counts[cell["outcome"]] = counts.get(cell["outcome"], 0) + 1
    return counts


def one_run(size: int, delay_ms: float, extra: list[str]) -> tuple[float, int, dict[str, int]]:
    """Wall seconds of the run alone (not the fleet's start) and the generations it sent."""
    launcher = FakeLauncher(
        "vllm", workers=size, extra_args=("--engine-call-delay-ms", f"{delay_ms:g}")
    )
    target = launcher.start()
    try:
        with tempfile.TemporaryDirectory(prefix="rl-fleet-cost-") as scratch:
            command = [
                sys.executable,
                "-m",
                "rl_conformance",
                "run",
                "-q",
                "--frontend",
                target.frontend_url,
                "--rl-url",
                str(target.rl_url),
                "--backend",
                "vllm",
                "--allow-mutations",
                "--all-workers",
                *CHECKPOINTS,
                "--report-dir",
                scratch,
                *extra,
            ]
            started = time.perf_counter()
            subprocess.run(
                command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            wall = time.perf_counter() - started
            matrix = json.loads((Path(scratch) / "matrix.json").read_text())
    finally:
        launcher.stop()
    return wall, generations(matrix), outcomes(matrix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", default="2,8,32,64")
    parser.add_argument("--engine-call-delay-ms", type=float, default=50.0)
    parser.add_argument("extra", nargs="*", help="flags given to every run (after --)")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    walls: dict[int, list[float]] = {size: [] for size in sizes}
    sent: dict[int, list[int]] = {size: [] for size in sizes}
    for round_ in range(args.repeat):
        for size in sizes:
            wall, count, found = one_run(size, args.engine_call_delay_ms, args.extra)
            walls[size].append(wall)
            sent[size].append(count)
            print(
                f"  round {round_ + 1}, {size:3d} workers: {wall:6.1f} s, {count:5d} "
                f"generations, {found}",
                flush=True,
            )
    print(
        f"mutating run by URL, median of {args.repeat} (each engine call "
        f"{args.engine_call_delay_ms:g} ms; run flags: {' '.join(args.extra) or 'none'}):"
    )
    for size in sizes:
        print(
            f"  {size:3d} workers: {statistics.median(walls[size]):6.1f} s, "
            f"{statistics.median(sent[size]):7.0f} generations"
        )
    small, large = sizes[0], sizes[-1]
    print(
        f"  {large}/{small} workers: "
        f"{statistics.median(walls[large]) / statistics.median(walls[small]):.2f}x the wall time, "
        f"{statistics.median(sent[large]) / statistics.median(sent[small]):.2f}x the generations"
    )


if __name__ == "__main__":
    main()
