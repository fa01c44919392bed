"""`rl-conformance check-record FILE` and `rl-conformance verify-bundle DIR`: a
`dynamo.rl.validation.v1` record held to the rules of Dynamo's own checker (its structure; with
`--publication-gate`, the stricter publication rules), and a report directory held to its
`bundle.json` (and that index to a digest kept elsewhere, `--sha256`). Exit 0: no finding; 1:
findings, each on its own line; 2: the file or directory cannot be read."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXIT_FINDINGS = 1
EXIT_UNREADABLE = 2


def register(commands: Any) -> None:
    check = commands.add_parser(
        "check-record",
        help="hold a dynamo.rl.validation.v1 record to the rules of Dynamo's checker",
        description=__doc__,
    )
    check.add_argument("record", metavar="FILE", help="a dynamo.rl.validation.v1 record (JSON)")
    check.add_argument(
        "--publication-gate",
        action="store_true",
        help="the stricter rules a record must meet to be published",
    )
    check.set_defaults(handler=handle_check)
    verify = commands.add_parser(
        "verify-bundle",
        help="check that a report directory is what its bundle.json says it was",
        description=__doc__,
    )
    verify.add_argument("directory", metavar="DIR", help="a report directory holding bundle.json")
    verify.add_argument(
        "--sha256", metavar="DIGEST", help="the digest of bundle.json printed at the end of the run"
    )
    verify.set_defaults(handler=handle_verify)


def _report(findings: list[str], what: str) -> int:
    for finding in findings:
        print(finding)
    if findings:
        print(f"rl-conformance: {what}: {len(findings)} finding(s)", file=sys.stderr)
        return EXIT_FINDINGS
    print(f"{what}: no finding")
    return 0


def handle_check(args: argparse.Namespace) -> int:
    from ..reports.record_rules import publication_findings, structure_findings

    path = Path(args.record)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"rl-conformance: check-record {path}: cannot read it: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    rules = publication_findings if args.publication_gate else structure_findings
    gate = "publication gate" if args.publication_gate else "structure"
    return _report(rules(record), f"{path} ({gate})")


def handle_verify(args: argparse.Namespace) -> int:
    from ..reports.bundle import verify_index

    directory = Path(args.directory)
    if not directory.is_dir():
        print(f"rl-conformance: verify-bundle {directory}: no such directory", file=sys.stderr)
        return EXIT_UNREADABLE
    return _report(verify_index(directory, args.sha256), f"{directory}/bundle.json")
