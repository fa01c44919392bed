"""Wall time of the default run (`rl-conformance run`: the four fake deployments, targets tested
at once), with a breakdown per suite and per target, and the same run in one process
(`--jobs 1`) for comparison, alternating so load from elsewhere hits both alike.

With `--compare CHECKOUT` the default run of another checkout of this project (its harness,
fakes, suites and schemas: `checkout_environment`) alternates with this one's instead, for a
before/after measured in one run.

Prints figures; asserts nothing. Usage: python benchmarks/default_run.py [--repeat N]
[--compare CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

GOAL_S = 5.0


SUBPACKAGES = {"rl_conformance.suites": "suites", "rl_conformance.schemas": "schemas"}
"""Packages an editable install maps to this checkout's directories by name, whatever comes first
on sys.path: another checkout's run must be given its own."""

CHECKOUT_FINDER = """
import importlib.util
import sys


class CheckoutPackages:
    def find_spec(self, name, path=None, target=None):
        place = {places!r}.get(name)
        if place is None:
            return None
        return importlib.util.spec_from_file_location(
            name, place + "/__init__.py", submodule_search_locations=[place]
        )


sys.meta_path.insert(0, CheckoutPackages())
"""


def checkout_environment(checkout: str, scratch: str) -> dict[str, str]:
    """The environment that runs `checkout`'s code: its packages first on the path, and a
    `sitecustomize` (in `scratch`) that finds its suites and schemas, which an editable install of
    this checkout would otherwise supply."""
    places = {name: str(Path(checkout) / folder) for name, folder in SUBPACKAGES.items()}
    Path(scratch, "sitecustomize.py").write_text(CHECKOUT_FINDER.format(places=places))
    return dict(os.environ, PYTHONPATH=os.pathsep.join([scratch, checkout]))


def one_run(seed: int, jobs: str, checkout: str = "") -> tuple[float, float, dict[str, Any]]:
    """Wall seconds, CPU seconds (the run and everything it started) and the matrix; `checkout`:
    another checkout's code (harness, fakes, suites and schemas) instead of this one's."""
    # `python -m` puts the working directory first on sys.path: the checkout's, to import its code
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with (
        tempfile.TemporaryDirectory(prefix="rl-bench-") as scratch,
        tempfile.TemporaryDirectory(prefix="rl-bench-site-") as site,
    ):
        env = checkout_environment(checkout, site) if checkout else None
        started = time.perf_counter()
        command = [sys.executable, "-m", "rl_conformance", "run", "-q", "--jobs", jobs]
        subprocess.run(
            [*command, "--seed", str(seed), "--report-dir", scratch],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=checkout or None,
        )
        elapsed = time.perf_counter() - started
        matrix = json.loads((Path(scratch) / "matrix.json").read_text())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, matrix


def breakdown(matrix: dict[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    """Test seconds per suite module and per target (each test counted once)."""
    seen: set[tuple[str, str]] = set()
    suites: dict[str, float] = defaultdict(float)
    targets: dict[str, float] = defaultdict(float)
    for row in matrix["capabilities"]:
        for target, cell in row["cells"].items():
            for test in cell["tests"]:
                if (target, test["nodeid"]) in seen:
                    continue
                seen.add((target, test["nodeid"]))
                suites[test["nodeid"].split("::")[0]] += test["duration_s"]
                targets[target] += test["duration_s"]
    return dict(suites), dict(targets)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--compare",
        metavar="CHECKOUT",
        default="",
        help="another checkout: its default run alternates with this one's (no --jobs 1 runs)",
    )
    args = parser.parse_args()
    if args.compare:
        compare(args.repeat, str(Path(args.compare).resolve()))
        return
    walls: dict[str, list[float]] = {"auto": [], "1": []}
    cpus: dict[str, list[float]] = {"auto": [], "1": []}
    last: dict[str, Any] = {}
    for seed in range(args.repeat):
        for jobs in ("auto", "1"):
            elapsed, cpu, matrix = one_run(seed, jobs)
            walls[jobs].append(elapsed)
            cpus[jobs].append(cpu)
            if jobs == "auto":
                last = matrix
            print(
                f"run {seed} --jobs {jobs:>4}: {elapsed:6.2f} s wall, {cpu:6.2f} s CPU, "
                f"summary {matrix['summary']}"
            )
    parallel, serial = statistics.median(walls["auto"]), statistics.median(walls["1"])
    print(
        f"default run (--jobs auto): median {parallel:.2f} s wall, "
        f"{statistics.median(cpus['auto']):.2f} s CPU (n={args.repeat}; goal <= {GOAL_S:g} s)"
    )
    print(
        f"in one process (--jobs 1): median {serial:.2f} s wall, "
        f"{statistics.median(cpus['1']):.2f} s CPU; parallel / serial: {parallel / serial:.2f}"
    )
    suites, targets = breakdown(last)
    print("test time per suite (last parallel run, all targets):")
    for suite, seconds in sorted(suites.items(), key=lambda item: -item[1]):
        print(f"  {suite:<34} {seconds:6.2f} s")
    print("test time per target (each target's tests run in order, targets at once):")
    for target, seconds in sorted(targets.items(), key=lambda item: -item[1]):
        print(f"  {target:<34} {seconds:6.2f} s")


def compare(repeat: int, checkout: str) -> None:
    walls: dict[str, list[float]] = {"this": [], "other": []}
    cpus: dict[str, list[float]] = {"this": [], "other": []}
    for seed in range(repeat):
        for name, path in (("other", checkout), ("this", "")):
            elapsed, cpu, matrix = one_run(seed, "auto", path)
            walls[name].append(elapsed)
            cpus[name].append(cpu)
            summary = matrix["summary"]
            print(f"run {seed} {name:>5}: {elapsed:6.2f} s wall, {cpu:6.2f} s CPU, {summary}")
    for name, label in (("other", checkout), ("this", "this checkout")):
        print(
            f"{label}: median {statistics.median(walls[name]):.2f} s wall, "
            f"{statistics.median(cpus[name]):.2f} s CPU (n={repeat})"
        )
    ratio = statistics.median(walls["this"]) / statistics.median(walls["other"])
    print(f"this / other (median wall): {ratio:.2f}")


if __name__ == "__main__":
    main()
