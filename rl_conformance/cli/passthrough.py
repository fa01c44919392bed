"""`rl-conformance passthrough`: each engine fault behind the real Dynamo frontend: rejected,
repaired or passed through, and caught by the suite or not. Exit non-zero on a hole."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, LaunchError
from ..model.options import OVERWRITE_HELP
from ..reports.directory import claim
from .shards import default_jobs, run_shards

EXIT_OK, EXIT_FAILED = 0, 1
MAX_DEFAULT_JOBS = 3


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "passthrough",
        help="engine faults through the real Dynamo frontend: rejected, repaired or passed "
        "through, and caught by the suite or not",
    )
    parser.add_argument(
        "--report-dir",
        default="passthrough-report",
        metavar="DIR",
        help="where the passthrough study is written (default ./passthrough-report)",
    )
    parser.add_argument(
        "--dynamo-python",
        metavar="PATH",
        help="python of a virtual environment with ai-dynamo (default: "
        "$RL_CONFORMANCE_DYNAMO_PYTHON, else ./.venv-dynamo's, as install-dynamo makes it)",
    )
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.add_argument(
        "--engine-fault",
        action="append",
        default=[],
        metavar="NAME",
        help="only these faults (default: every engine fault)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=default_jobs(MAX_DEFAULT_JOBS),
        metavar="N",
        help="faults split over N parallel processes, each with its own real frontend "
        "(default: twice the machine's cores, at most 3)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from fake_backends.faults.engine import ENGINE_FAULT_NAMES

    from . import passthrough_study as passthrough

    faults = args.engine_fault or list(ENGINE_FAULT_NAMES)
    unknown = sorted(set(faults) - set(ENGINE_FAULT_NAMES))
    if unknown:
        raise ConfigurationError(
            f"--engine-fault: unknown {unknown}; expected one of {', '.join(ENGINE_FAULT_NAMES)}"
        )
    if args.jobs < 1:
        raise ConfigurationError(f"--jobs: expected at least 1, observed {args.jobs}")
    python = Path(args.dynamo_python) if args.dynamo_python else None
    directory = Path(args.report_dir)
    claim(directory, overwrite=args.overwrite)
    if args.jobs > 1 and len(faults) > 1:
        report = _run_shards(args, faults, directory)
        if report is None:
            return EXIT_FAILED
    else:
        try:
            report = passthrough.build_report(directory, python, faults)
        except LaunchError as exc:
            print(f"rl-conformance: {exc}", file=sys.stderr)
            return EXIT_FAILED
    passthrough.write(report, directory)
    print(passthrough.render(report))
    return EXIT_FAILED if report["holes"] else EXIT_OK


def _run_shards(
    args: argparse.Namespace, faults: list[str], directory: Path
) -> dict[str, Any] | None:
    """Every `jobs`-th fault in its own process; the reports merged in the catalogue's order."""
    shards = [shard for shard in (faults[i :: args.jobs] for i in range(args.jobs)) if shard]
    arguments = []
    for shard in shards:
        shard_arguments = ["--jobs", "1"]
        if args.dynamo_python:
            shard_arguments += ["--dynamo-python", args.dynamo_python]
        for fault in shard:
            shard_arguments += ["--engine-fault", fault]
        arguments.append(shard_arguments)
    reports = run_shards("passthrough", arguments, directory, "passthrough.json")
    if reports is None:
        return None
    rows = {row["fault"]: row for report in reports for row in report["faults"]}
    ordered = [rows[fault] for fault in faults if fault in rows]
    return {
        **reports[0],
        "duration_s": max(report["duration_s"] for report in reports),
        "faults": ordered,
        "holes": [row["fault"] for row in ordered if row["hole"]],
    }
