"""Wall time of `rl-conformance run` against deployments that are dead, wedged or hostile (one
`fake_backends.deployment.hostile` mode each, serving both the frontend and the RL listener), at the
default 30 s deadline, against the bound a nightly job can live with: 2 x deadline + 30 s.

Prints figures; asserts nothing. Usage: python benchmarks/hostile_deployments.py
[--deadline S] [--mode MODE ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fake_backends.deployment.hostile import MODES, hostile_server


def one_run(mode: str, deadline: float) -> tuple[float, int, dict[str, int], bool]:
    with (
        hostile_server(mode) as url,
        hostile_server(mode) as rl_url,  # the RL listener is a listener of its own
        tempfile.TemporaryDirectory(prefix="rl-bench-") as scratch,
    ):
        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "rl_conformance",
                "run",
                "-q",
                "--report-dir",
                scratch,
                "--frontend",
                url,
                "--rl-url",
                rl_url,
                "--backend",
                "vllm",
                "--model",
                "toy",
                "--deadline",
                str(deadline),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - started
        matrix = json.loads((Path(scratch) / "matrix.json").read_text())
    traceback = "Traceback" in done.stdout + done.stderr
    return elapsed, done.returncode, matrix["summary"], traceback


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deadline", type=float, default=30.0)
    parser.add_argument("--mode", action="append", choices=MODES)
    args = parser.parse_args()
    bound = 2 * args.deadline + 30
    print(f"deadline {args.deadline:g} s, bound {bound:g} s")
    print(
        f"{'mode':20} {'wall s':>7} {'exit':>4}  {'cells (fail/error/skipped/pass)':32} traceback"
    )
    walls = []
    for mode in args.mode or MODES:
        elapsed, code, summary, traceback = one_run(mode, args.deadline)
        walls.append(elapsed)
        cells = "/".join(str(summary[k]) for k in ("fail", "error", "skipped", "pass"))
        flag = "" if elapsed < bound else "  OVER THE BOUND"
        print(
            f"{mode:20} {elapsed:7.1f} {code:>4}  {cells:32} {'yes' if traceback else 'no'}{flag}"
        )
    walls.sort()
    median, worst = walls[len(walls) // 2], walls[-1]
    print(f"median {median:.1f} s, max {worst:.1f} s ({worst / bound:.0%} of the bound)")


if __name__ == "__main__":
    main()
