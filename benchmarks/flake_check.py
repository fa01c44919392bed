"""Runs the full default suite N times with different seeds and reports every cell that changes.

Prints figures; asserts nothing. Usage: python benchmarks/flake_check.py [--runs 20]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from default_run import one_run


def outcomes(seed: int) -> tuple[dict[tuple[str, str], str], float]:
    elapsed, matrix = one_run(seed)
    cells = {
        (row["id"], target): cell["outcome"]
        for row in matrix["capabilities"]
        for target, cell in row["cells"].items()
    }
    return cells, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    times = []
    for seed in range(args.runs):
        cells, elapsed = outcomes(seed)
        times.append(elapsed)
        for key, outcome in cells.items():
            seen[key].add(outcome)
        print(f"seed {seed:2d}: {elapsed:5.1f} s, {len(cells)} cells", flush=True)
    changed = {key: sorted(values) for key, values in seen.items() if len(values) > 1}
    print(f"\n{len(changed)} of {len(seen)} cells changed across {args.runs} seeded runs")
    for (capability, target), values in sorted(changed.items()):
        print(f"  {capability} on {target}: {', '.join(values)}")
    print(f"median run: {sorted(times)[len(times) // 2]:.1f} s")


if __name__ == "__main__":
    main()
