"""`rl-conformance check-record FILE`, `verify-bundle DIR` and `check-artifact-bundle DIR`: a
`dynamo.rl.validation.v1` record held to the rules of Dynamo's own checker (its structure; with
`--publication-gate`, the stricter publication rules), and a report directory held to its
`bundle.json` (and that index to a digest kept elsewhere, `--sha256`: without it only
self-consistency is checked, and the command says so), and its `artifact-bundle.json`
(`--artifact-bundle`) held to the rules of Dynamo's `rl_artifact_bundle.py`: a URI that climbs
out of the bundle or names a missing file is refused in one sentence. Exit 0: no finding; 1:
findings, each on its own line; 2: the file or directory cannot be read, or the digest is not
one."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

EXIT_FINDINGS = 1
EXIT_UNREADABLE = 2
DIGEST = re.compile(r"[0-9a-fA-F]{64}")


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
        "--sha256",
        metavar="DIGEST",
        help="the digest of bundle.json printed at the end of the run (without it, only "
        "self-consistency is checked: an edit that rewrote bundle.json too passes)",
    )
    verify.set_defaults(handler=handle_verify)
    artifacts = commands.add_parser(
        "check-artifact-bundle",
        help="hold a run's artifact-bundle.json (dynamo.rl.artifact-bundle.v1) to the rules of "
        "Dynamo's rl_artifact_bundle.py",
        description=__doc__,
    )
    artifacts.add_argument("directory", metavar="DIR", help="a report directory")
    artifacts.add_argument(
        "--sha256", metavar="DIGEST", help="the digest of artifact-bundle.json kept elsewhere"
    )
    artifacts.add_argument(
        "--publication-gate",
        action="store_true",
        help="also require a complete closure with no finding, as Dynamo's verify does",
    )
    artifacts.set_defaults(handler=handle_artifacts)


def _report(findings: list[str], what: str) -> int:
    for finding in findings:
        print(finding)
    if len(findings) > 1:
        print(f"rl-conformance: {what}: {len(findings)} findings", file=sys.stderr)
    if findings:
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
    from ..reports.bundle import INDEX, read_index, verify_index

    directory = Path(args.directory)
    if not directory.is_dir():
        print(f"rl-conformance: verify-bundle {directory}: no such directory", file=sys.stderr)
        return EXIT_UNREADABLE
    digest = args.sha256
    if digest is not None and not DIGEST.fullmatch(digest):
        print(
            f"rl-conformance: verify-bundle --sha256: expected the 64 hexadecimal digits the run "
            f"printed after 'bundle.json sha256', observed {digest!r}",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    findings = verify_index(directory, digest)
    index = read_index(directory / INDEX) if (directory / INDEX).is_file() else None
    if isinstance(index, str) and findings == [index]:  # not an index: one sentence
        print(f"rl-conformance: verify-bundle {directory}: {index}", file=sys.stderr)
        return EXIT_FINDINGS
    if findings:
        return _report(findings, f"{directory}/bundle.json")
    if digest is not None:
        print(
            f"{directory}: every file is one the run wrote (bundle.json has the digest given, "
            "and every file the sha256 bundle.json lists)"
        )
        return 0
    print(
        f"{directory}: self-consistent only (every file matches bundle.json, but bundle.json "
        "itself was not checked, so an edit that rewrote it too passes): give --sha256 with the "
        "digest the run printed to prove the files are the run's"
    )
    print(
        "rl-conformance: verify-bundle without --sha256 checked self-consistency only",
        file=sys.stderr,
    )
    return 0


def handle_artifacts(args: argparse.Namespace) -> int:
    from ..reports.artifact_bundle import INDEX, BundleRefused, verify

    directory = Path(args.directory)
    if not directory.is_dir():
        print(
            f"rl-conformance: check-artifact-bundle {directory}: no such directory", file=sys.stderr
        )
        return EXIT_UNREADABLE
    if args.sha256 is not None and not DIGEST.fullmatch(args.sha256):
        print(
            "rl-conformance: check-artifact-bundle --sha256: expected 64 hexadecimal digits, "
            f"observed {args.sha256!r}",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    try:
        findings = verify(directory, args.sha256, publication=args.publication_gate)
    except BundleRefused as exc:
        print(f"rl-conformance: check-artifact-bundle {directory}: {exc}", file=sys.stderr)
        return EXIT_FINDINGS
    except OSError as exc:
        print(
            f"rl-conformance: check-artifact-bundle {directory}: cannot read it: {exc}",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    return _report(findings, f"{directory}/{INDEX}")
