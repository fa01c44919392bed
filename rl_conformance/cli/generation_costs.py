"""`rl-conformance generation-costs`: measure each suite test's generation requests on our fakes,
at two example counts, and write the estimates `--budget-generations` and `--dry-run` use
(`rl_conformance/generation_costs.json`): per test, `fixed + per_example x --examples`, the
largest over the fakes."""

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
    parser.set_defaults(handler=handle)


def measure(examples: int) -> dict[str, int]:
    """Generation requests per cost key at `examples`, the largest over the four fakes."""
    with tempfile.TemporaryDirectory(prefix="rl-costs-") as scratch:
        plan = plan_run(RunConfig(examples=examples, seed=0, report_dir=scratch))
        result = run(plan, verbosity="quiet", jobs=parallel_jobs(plan))
    if result.matrix is None:
        raise SystemExit(f"the measuring run wrote no matrix (pytest exit {result.pytest_exit})")
    found: dict[str, int] = {}
    for row in result.matrix.to_json()["capabilities"]:
        for target_id, cell in row["cells"].items():
            for test in cell["tests"]:
                key = cost_key(test["nodeid"], target_id)
                found[key] = max(found.get(key, 0), int(test.get("generations", 0)))
    return found


def handle(args: argparse.Namespace) -> int:
    low, high = measure(LOW), measure(HIGH)
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
    return 0
