"""`rl-conformance generation-costs`: measure each suite test's generation requests on our fakes,
at two example counts, and write the estimates `--budget-generations` and `--dry-run` use
(`rl_conformance/generation_costs.json`): per test, `fixed + per_example x --examples`, the
largest over the fakes. The same runs give each test's seconds per fake at the default
examples, which a parallel run divides a fake's tests by (`rl_conformance/suite_seconds.json`,
`plugin.balance`)."""

from __future__ import annotations

import argparse
import json
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from ..client.budget import COSTS_RESOURCE, FEWEST_EXAMPLES, cost_key
from ..launchers.run_plan import plan_run
from ..model.config import RunConfig
from ..plugin.balance import SECONDS_RESOURCE
from ..plugin.runner import parallel_jobs, run

LOW, HIGH = FEWEST_EXAMPLES, 8
"""The example counts measured: a budget never gives a property test fewer than LOW."""


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "generation-costs",
        help="measure each test's generation requests on the fakes (the budget's estimates)",
    )
    parser.add_argument(
        "--output",
        default=str(resources.files("rl_conformance").joinpath(COSTS_RESOURCE)),
        help="where to write the table (default: the packaged one)",
    )
    parser.add_argument(
        "--seconds-output",
        default=str(resources.files("rl_conformance").joinpath(SECONDS_RESOURCE)),
        help="where to write each test's seconds per fake (default: the packaged one)",
    )
    parser.set_defaults(handler=handle)


def measure(examples: int) -> tuple[dict[str, int], dict[str, dict[str, float]]]:
    """Generation requests per cost key at `examples`, the largest over the four fakes; and the
    seconds of each test per fake (each test counted once, by its cost key)."""
    with tempfile.TemporaryDirectory(prefix="rl-costs-") as scratch:
        plan = plan_run(RunConfig(examples=examples, seed=0, report_dir=scratch))
        result = run(plan, verbosity="quiet", jobs=parallel_jobs(plan))
    if result.matrix is None:
        raise SystemExit(f"the measuring run wrote no matrix (pytest exit {result.pytest_exit})")
    found: dict[str, int] = {}
    seconds: dict[str, dict[str, float]] = {}
    timed: set[tuple[str, str]] = set()
    for row in result.matrix.to_json()["capabilities"]:
        for target_id, cell in row["cells"].items():
            for test in cell["tests"]:
                key = cost_key(test["nodeid"], target_id)
                found[key] = max(found.get(key, 0), int(test.get("generations", 0)))
                if (target_id, key) not in timed:
                    timed.add((target_id, key))
                    seconds.setdefault(target_id, {})[key] = float(test["duration_s"])
    return found, seconds


def handle(args: argparse.Namespace) -> int:
    (low, _), (high, seconds) = measure(LOW), measure(HIGH)
    tests: dict[str, dict[str, float]] = {}
    for key in sorted(set(low) | set(high)):
        per_example = max(0.0, (high.get(key, 0) - low.get(key, 0)) / (HIGH - LOW))
        fixed = max(0.0, high.get(key, 0) - per_example * HIGH)
        tests[key] = {"fixed": round(fixed, 2), "per_example": round(per_example, 3)}
    document = {
        "description": "Generation requests per suite test, measured on the four fakes at "
        f"--examples {LOW} and {HIGH} (rl-conformance generation-costs): fixed + per_example x "
        "examples, the largest over the fakes.",
        "tests": tests,
    }
    Path(args.output).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"{len(tests)} tests measured; written to {args.output}")
    write_seconds(Path(args.seconds_output), seconds)
    return 0


def write_seconds(path: Path, seconds: dict[str, dict[str, float]]) -> None:
    document = {
        "description": "Seconds of each suite test per fake, measured in the default run at "
        f"--examples {HIGH} (rl-conformance generation-costs): how a parallel run divides a "
        "fake's tests between deployments (plugin/balance.py).",
        "targets": {
            target_id: {test: round(value, 3) for test, value in sorted(tests.items())}
            for target_id, tests in sorted(seconds.items())
        },
    }
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"suite seconds of {len(seconds)} fakes written to {path}")
