"""`rl-conformance profiles`: the rollout requests and administration routes of verl, NeMo RL,
slime and prime-rl (read from their public sources, `fixtures/framework-profiles/`) replayed
against the chosen deployments, one column per framework and deployment: will framework X work
here. Read-only. Takes the deployment flags of `run`; writes the matrix to `--report-dir`
(default ./profiles-report, so it runs in a directory where `run` wrote ./conformance-report).

A `fail` cell is an answer (that framework would not work there), not a failure of the command:
exit 0 when every cell was answered, 1 when one is `error` (a deployment that did not start)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import LaunchError
from ..model.config import RunConfig
from ..model.options import add_arguments
from ..reports.directory import claim

EXIT_OK, EXIT_FAILED = 0, 1
REPORT_DIR = "profiles-report"


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "profiles",
        help="replay RL frameworks' rollout requests against deployments",
        description=__doc__,
    )
    add_arguments(parser)
    for action in parser._actions:  # its own directory: it runs beside `run`, not instead
        if action.dest == "report_dir":
            action.default = REPORT_DIR
            action.help = f"where the profiles' matrix goes (default ./{REPORT_DIR})"
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress line per deployment"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from ..certify.profiles import PROFILE_CAPABILITIES, PROFILES, profile_target, replay
    from ..client.http import Client
    from ..launchers.run_plan import plan_run
    from ..model.matrix import ExitRule, Outcome, RunInfo, TestRecord, build_matrix, now
    from ..reports import write_reports

    plan = plan_run(RunConfig.from_options(args))
    config = plan.config
    claim(config.report_path, overwrite=config.overwrite)
    started = now()
    pool = plan.pool
    client = Client(deadline_s=config.deadline, network=plan.network)
    targets, records = [], []
    try:
        for target_id in pool.ids:
            client.credentials = plan.credentials_for(target_id)
            try:
                deployment = pool.get(target_id, client)
            except LaunchError as exc:
                placeholder = next(t for t in pool.planned_targets() if t.id == target_id)
                for profile in PROFILES:
                    target = profile_target(profile, placeholder)
                    targets.append(target)
                    records.extend(
                        TestRecord(
                            f"{c.id}[{target.id}]", (c.id,), target.id, Outcome.ERROR, str(exc)
                        )
                        for c in PROFILE_CAPABILITIES
                    )
                continue
            found, replayed = replay(deployment, client)
            targets.extend(found)
            records.extend(replayed)
            if not args.quiet:
                print(f"{target_id}: replayed {len(found)} profiles", file=sys.stderr)
            pool.release(target_id, client)
    finally:
        pool.stop_all()
        client.close()
    info = RunInfo(started, now(), True, config.seed, warnings=tuple(plan.network.warnings()))
    matrix = build_matrix(PROFILE_CAPABILITIES, targets, records, info)
    matrix.exit_rule = ExitRule(failing=(Outcome.ERROR,))  # a fail is an answer
    write_reports(matrix.to_json(), config.report_path)
    for row in matrix.rows:
        print(row.capability.id)
        for target_id, cell in row.cells.items():
            print(f"  {cell.outcome.value:>11}  {target_id}: {cell.reason}")
    print(f"written to {config.report_path / 'matrix.md'}")
    return EXIT_OK if matrix.exit_status == 0 else EXIT_FAILED
