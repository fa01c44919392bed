"""`rl-conformance kill-matrix`: the suite against every named fault of our fakes; writes which
capabilities each fault flips and which faults each check kills. Exit 0 only if every fault is
killed, every check kills one, and the clean fakes pass."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..config import RunConfig
from ..runner import run

EXIT_OK, EXIT_FAILED = 0, 1


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "kill-matrix",
        help="run the suite against every named fault of our fakes and report what each "
        "check kills",
    )
    parser.add_argument("--report-dir", default="kill-matrix-report", metavar="DIR")
    parser.add_argument("--examples", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    config = RunConfig(
        fault_matrix=True, report_dir=args.report_dir, examples=args.examples, seed=args.seed
    )
    result = run(config, verbosity="quiet")
    path = config.report_path / "kill-matrix.json"
    if result.matrix is None or not path.exists():
        print(f"rl-conformance: no kill matrix was written ({path})", file=sys.stderr)
        return EXIT_FAILED
    kill = json.loads(path.read_text())
    print(
        f"{len(kill['faults'])} faults, unkilled: {kill['unkilled_faults'] or 'none'}; "
        f"checks killing nothing: {kill['checks_killing_nothing'] or 'none'}; "
        f"clean fakes failing: {kill['clean_failures'] or 'none'}"
    )
    print(f"written to {config.report_path / 'kill-matrix.md'}")
    bad = kill["unkilled_faults"] or kill["checks_killing_nothing"] or kill["clean_failures"]
    return EXIT_FAILED if bad or not kill["complete"] else EXIT_OK
