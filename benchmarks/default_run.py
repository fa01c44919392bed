"""Wall time of the full default run (`rl-conformance run`, three fake deployments).

Prints figures; asserts nothing. Usage: python benchmarks/default_run.py [--repeat N]
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


def one_run(seed: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(prefix="rl-bench-") as scratch:
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "rl_conformance",
                "run",
                "-q",
                "--seed",
                str(seed),
                "--report-dir",
                scratch,
            ],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        elapsed = time.perf_counter() - started
        matrix = json.loads((Path(scratch) / "matrix.json").read_text())
    return elapsed, matrix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times = []
    for seed in range(args.repeat):
        elapsed, matrix = one_run(seed)
        times.append(elapsed)
        cells = sum(matrix["summary"].values())
        print(f"run {seed}: {elapsed:6.2f} s wall, {cells} cells, summary {matrix['summary']}")
    print(
        f"median wall time of the default run: {statistics.median(times):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f}, n={len(times)}; goal < 30 s)"
    )


if __name__ == "__main__":
    main()
