"""`rl-conformance kill-matrix`: the suite against every named fault of our fakes; writes which
capabilities each fault flips and which faults each check kills. Exit 0 only if every fault is
killed, every check kills one, and the clean fakes pass.

The faults are independent runs that mostly wait on the network, so `--jobs N` (default: four
per core, at most 8) runs them in N parallel processes: the clean fakes in one shard,
the faults in shards of a few each, the next shard starting as soon as one ends (a fault that
makes its fake slow delays only its own shard), and the shards' matrices merged into one."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from ..checks.base import rule_ids
from ..errors import ConfigurationError
from ..launchers.plan import fault_shard_count
from ..launchers.run_plan import plan_run
from ..model.config import RunConfig
from ..model.killmatrix import (
    build_kill_matrix,
    merge_matrix_documents,
    write_kill_matrix,
    write_reviewed_flips,
)
from ..model.options import OVERWRITE_HELP
from ..plugin.runner import run
from ..reports import write_reports
from ..reports.directory import claim
from .shards import default_jobs, run_shards, shard_directory

EXIT_OK, EXIT_FAILED = 0, 1
MAX_DEFAULT_JOBS = 8
JOBS_PER_CORE = 4


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "kill-matrix",
        help="run the suite against every named fault of our fakes and report what each "
        "check kills",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--report-dir",
        default="kill-matrix-report",
        metavar="DIR",
        help="where the kill matrix is written (default ./kill-matrix-report)",
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=4,
        metavar="N",
        help="hypothesis examples per property test in each fault's run (default 4)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed for generated requests (default 0)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=default_jobs(MAX_DEFAULT_JOBS, JOBS_PER_CORE),
        metavar="N",
        help="shards run at once, each in its own process (default: four per core of the "
        "machine, at most 8: a shard mostly waits on its fakes' deadlines)",
    )
    parser.add_argument(
        "--flips",
        type=Path,
        default=None,
        metavar="FILE",
        help="also rewrite the reviewed flips FILE (fixtures/expected/kill-matrix-flips.json) "
        "with what each fault flipped in this run, for its diff to be reviewed; only from a "
        "complete kill matrix",
    )
    parser.add_argument("--shard", default=None, metavar="I/N", help=argparse.SUPPRESS)
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.set_defaults(handler=handle)


def _shard(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    index, _, count = value.partition("/")
    try:
        shard = int(index), int(count)
    except ValueError:
        raise ConfigurationError(f"--shard: expected I/N, observed {value!r}") from None
    if not 0 <= shard[0] < shard[1]:
        raise ConfigurationError(f"--shard: expected 0 <= I < N, observed {value!r}")
    return shard


def handle(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise ConfigurationError(f"--jobs: expected at least 1, observed {args.jobs}")
    if args.flips is not None:
        _check_flips_file(args.flips)
    report = Path(args.report_dir)
    shard = _shard(args.shard)
    claim(report, overwrite=args.overwrite)
    if shard is None and args.jobs > 1:
        document = _run_shards(args, report)
        if document is None:
            return EXIT_FAILED
        write_reports(document, report)
        write_kill_matrix(build_kill_matrix(document, rule_ids()), report)
    else:
        config = RunConfig(
            fault_matrix=True,
            fault_shard=shard,
            verify_reproducers=True,
            report_dir=args.report_dir,
            examples=args.examples,
            seed=args.seed,
        )
        result = run(plan_run(config), verbosity="quiet")
        if result.matrix is None:
            print(f"rl-conformance: no matrix was written ({report})", file=sys.stderr)
            return EXIT_FAILED
        if shard is not None:
            return EXIT_OK
    return _summarise(report, args.flips)


def _run_shards(args: argparse.Namespace, report: Path) -> dict[str, Any] | None:
    """Run every shard; the merged matrix (with every shard's wire logs), or None."""
    shards = fault_shard_count()
    documents = run_shards(
        "kill-matrix",
        [
            [
                "--shard",
                f"{index}/{shards}",
                "--examples",
                str(args.examples),
                "--seed",
                str(args.seed),
            ]
            for index in range(shards)
        ],
        report,
        "matrix.json",
        at_once=args.jobs,
    )
    if documents is None:
        return None
    for index in range(len(documents)):
        for log in sorted((shard_directory(report, index) / "wire").glob("*.json")):
            (report / "wire").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, report / "wire" / log.name)
    return merge_matrix_documents(documents)


def _check_flips_file(path: Path) -> None:
    """`--flips` names a JSON object to rewrite, or a new file in an existing directory: said
    before a run of several minutes, not after it."""
    if not path.parent.is_dir():
        raise ConfigurationError(
            f"--flips: expected a file in an existing directory, observed {str(path)!r}"
        )
    if not path.exists():
        return
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"--flips: expected a JSON file, observed {exc}") from None
    if not isinstance(document, dict):
        raise ConfigurationError(
            f"--flips: expected a JSON object, observed {type(document).__name__}"
        )


def _summarise(report: Path, flips: Path | None = None) -> int:
    path = report / "kill-matrix.json"
    if not path.exists():
        print(f"rl-conformance: no kill matrix was written ({path})", file=sys.stderr)
        return EXIT_FAILED
    kill = json.loads(path.read_text())
    print(
        f"{len(kill['faults'])} faults, unkilled: {kill['unkilled_faults'] or 'none'}; "
        f"checks killing nothing: {kill['checks_killing_nothing'] or 'none'}; "
        f"clean fakes failing: {kill['clean_failures'] or 'none'}"
    )
    print(f"written to {report / 'kill-matrix.md'}")
    if flips is not None and kill["complete"]:
        write_reviewed_flips(kill, flips)
        print(f"rewrote {flips}: review its diff (each flip must follow from its fault)")
    elif flips is not None:
        print(
            f"rl-conformance: {flips} not rewritten: the kill matrix is incomplete", file=sys.stderr
        )
    bad = kill["unkilled_faults"] or kill["checks_killing_nothing"] or kill["clean_failures"]
    return EXIT_FAILED if bad or not kill["complete"] else EXIT_OK
