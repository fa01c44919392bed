"""`rl-conformance passthrough`: each engine fault behind the real Dynamo frontend: rejected,
repaired or passed through, and caught by the suite or not. Exit non-zero on a hole."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, LaunchError

EXIT_OK, EXIT_FAILED = 0, 1


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "passthrough",
        help="engine faults through the real Dynamo frontend: rejected, repaired or passed "
        "through, and caught by the suite or not",
    )
    parser.add_argument("--report-dir", default="passthrough-report", metavar="DIR")
    parser.add_argument("--dynamo-python", metavar="PATH")
    parser.add_argument(
        "--engine-fault",
        action="append",
        default=[],
        metavar="NAME",
        help="only these faults (default: every engine fault)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from fake_backends.faults.engine import ENGINE_FAULT_NAMES

    from .. import passthrough

    faults = args.engine_fault or list(ENGINE_FAULT_NAMES)
    unknown = sorted(set(faults) - set(ENGINE_FAULT_NAMES))
    if unknown:
        raise ConfigurationError(
            f"--engine-fault: unknown {unknown}; expected one of {', '.join(ENGINE_FAULT_NAMES)}"
        )
    python = Path(args.dynamo_python) if args.dynamo_python else None
    directory = Path(args.report_dir)
    try:
        report = passthrough.build_report(directory, python, faults)
    except LaunchError as exc:
        print(f"rl-conformance: {exc}", file=sys.stderr)
        return EXIT_FAILED
    passthrough.write(report, directory)
    print(passthrough.render(report))
    return EXIT_FAILED if report["holes"] else EXIT_OK
