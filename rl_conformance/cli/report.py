"""`rl-conformance report DIR`: the reports of a run rebuilt from its journal (`records.jsonl`,
every test's record as it finished), for a run that was killed before it wrote them (SIGKILL,
the OOM killer, an evicted pod): `matrix.json`, `matrix.md`, `junit.xml`, `matrix.html`, the
failures' wire logs, the validation records and the bundle index, in DIR. A run that did not
finish is marked `complete: false` with the reason. Exit 0 if and only if the rebuilt run is
complete and no cell is fail or error. A directory whose run finished and wrote its reports is
left as it is (its outcome is printed) unless `--rebuild` asks for them again."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "report",
        help="rebuild a run's reports from the records it journalled (a run that was killed)",
        description=__doc__,
    )
    parser.add_argument("directory", metavar="DIR", help="the run's --report-dir")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the outcome line")
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="rebuild the reports even of a run that finished and wrote them (they are "
        "replaced; default: leave a finished run's reports as they are)",
    )
    parser.set_defaults(handler=handle)


def _finished(directory: Path) -> dict[str, Any] | None:
    """The matrix a run wrote when it finished, or None when there is none to keep."""
    try:
        document = json.loads((directory / "matrix.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("complete") is not True:
        return None
    return document if isinstance(document.get("exit_status"), int) else None


def handle(args: argparse.Namespace) -> int:
    from ..model.journal import JOURNAL, rebuild
    from ..reports import evidence, write_reports
    from ..reports.markdown import render_table

    directory = Path(args.directory)
    finished = None if args.rebuild else _finished(directory)
    if finished is not None:
        print(
            f"{directory} holds the reports of a run that finished at "
            f"{finished.get('finished_at', 'an unknown time')}: nothing to rebuild, nothing "
            "changed (give --rebuild to write them again from the journal)"
        )
        return int(finished["exit_status"])
    matrix = rebuild(directory)
    document = matrix.to_json()
    write_reports(document, directory)
    evidence.write_records(directory, document, evidence.kept_meta(directory))
    digest = evidence.seal(directory)
    if not args.quiet:
        for line in render_table(document):
            print(line)
    print(f"reports rebuilt from {directory / JOURNAL} in {directory}")
    print(f"bundle.json sha256 {digest}")
    if not matrix.run.complete:
        print(
            f"rl-conformance: incomplete run ({matrix.run.incomplete_reason})",
            file=sys.stderr,
        )
    return matrix.exit_status
