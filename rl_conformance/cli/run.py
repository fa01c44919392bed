"""`rl-conformance run`: the suites against the chosen deployments; the matrix is printed and
written to `--report-dir`. Exit 0 if and only if no cell is fail or error."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import ConfigurationError
from ..launchers.run_plan import plan_run
from ..model.config import RunConfig
from ..model.options import add_arguments
from ..plugin.runner import parallel_jobs, run
from ..reports.directory import claim


def register(commands: Any) -> None:
    parser = commands.add_parser("run", help="run the conformance suites and write the matrix")
    add_arguments(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the matrix")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print pytest's report of every failed test (the matrix always has the evidence)",
    )
    parser.add_argument(
        "--jobs",
        default="auto",
        metavar="N|auto",
        help="run the targets' tests in N worker processes, one target's tests together "
        "(default auto: one per target, several per fake, each on a deployment of its own, at "
        "most 12 and six times the cores; 1 runs in process)",
    )
    parser.add_argument("pytest_args", nargs="*", help="extra arguments for pytest (after --)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    plan = plan_run(RunConfig.from_options(args))
    config = plan.config
    claim(config.report_path, overwrite=config.overwrite)
    jobs = parallel_jobs(plan) if args.jobs == "auto" else _jobs(args.jobs)
    if config.dry_run:
        jobs = 1
    verbosity = "verbose" if args.verbose else "quiet" if args.quiet else "normal"
    for warning in plan.network.warnings():
        print(f"rl-conformance: !!! {warning}", file=sys.stderr)
    given = [url for url in (config.frontend, config.rl_url, *config.worker_url) if url]
    for route in plan.network.routes(given):
        print(f"rl-conformance: {route}", file=sys.stderr)
    try:
        result = run(plan, verbosity=verbosity, pytest_args=args.pytest_args, jobs=jobs)
    except ConfigurationError:
        raise  # a wrong input, found before anything started: exit 2 with its message
    except Exception as exc:  # a harness bug: one line, not a traceback
        print(f"rl-conformance: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    matrix = result.matrix
    if config.dry_run:
        return 0 if result.pytest_exit in (0, 5) else result.exit_status
    if matrix is None:
        said = _no_matrix(result.pytest_exit, args.pytest_args)
        print(f"rl-conformance: {said}", file=sys.stderr)
    elif not matrix.run.complete:
        print(
            f"rl-conformance: incomplete run ({matrix.run.incomplete_reason or 'interrupted'}); "
            f"cells not reached are errors in {config.report_path / 'matrix.json'}",
            file=sys.stderr,
        )
    return result.exit_status


def _no_matrix(status: int, pytest_args: list[str]) -> str:
    """Why no matrix was written, in the run's words: pytest's status is not the user's."""
    if status in (3, 4) and pytest_args:
        return (
            f"no matrix was written: the arguments given after -- ({' '.join(pytest_args)}) "
            "were refused, as said above"
        )
    return f"no matrix was written: the run ended before its first test (status {status})"


def _jobs(value: str) -> int:
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise ConfigurationError(f"--jobs: expected 'auto' or an integer >= 1, observed {value!r}")
    return jobs
