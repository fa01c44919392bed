"""`rl-conformance diff OLD.json NEW.json`: regressions (pass -> fail/error), fixes, newly
failing cells, coverage lost (pass -> skipped/unsupported/not-advertised, or a passing cell gone
with its capability or target), changed failure causes (fail -> fail with other failing checks
or violated fields), new and removed capabilities and targets.

Only what both runs judged is compared. A run that is not comparable (`not_comparable` in its
matrix: the preflight refused an input, a plane refused the credentials, a target was not
reached, --run-timeout, SIGINT or SIGTERM cut it) is named in one line, first. A target either
run never reached is not comparable and none of its cells is compared; the cells a cut run never
reached are "not run", never regressions, while the cells it reached are compared. Exit 1 on a
regression (and, with --fail-on-coverage-loss, on coverage lost), else 3 when either run is not
comparable, else 0; 2 on an unreadable file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..model.baseline import column, diff_matrices, load_matrix, render_diff


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "diff", help="compare two matrix.json files (a baseline and a new run)", description=__doc__
    )
    parser.add_argument("old", type=Path, metavar="OLD.json", help="the baseline matrix.json")
    parser.add_argument("new", type=Path, metavar="NEW.json", help="the newer matrix.json")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--markdown", action="store_true", help="Markdown (a CI step summary)")
    output.add_argument("--json", action="store_true", help="the diff as JSON")
    parser.add_argument(
        "--fail-on-coverage-loss",
        action="store_true",
        help="exit 1 also when coverage was lost: a cell that passed is now skipped, "
        "unsupported or not-advertised, or is gone with its capability or target",
    )
    parser.add_argument(
        "--old-target",
        metavar="ID",
        help="compare only this column of OLD.json (with --new-target: two columns of a "
        "release matrix, OLD.json and NEW.json being the same file if they are in one)",
    )
    parser.add_argument("--new-target", metavar="ID", help="... with this column of NEW.json")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    old, new = load_matrix(args.old), load_matrix(args.new)
    if bool(args.old_target) != bool(args.new_target):
        raise ConfigurationError("--old-target and --new-target go together: give both")
    if args.old_target:
        shown = f"{args.old_target} -> {args.new_target}"
        old, new = column(old, args.old_target, shown), column(new, args.new_target, shown)
    result = diff_matrices(old, new, fail_on_coverage_loss=args.fail_on_coverage_loss)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(render_diff(result, markdown=args.markdown), end="")
    return result.exit_status
