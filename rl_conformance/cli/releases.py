"""`rl-conformance releases MATRIX.json [--write FILE]`: a release matrix (`run --launch
dynamo-* --dynamo-python A --dynamo-python B ...`) as Markdown: each column's versions and
counts, and the capabilities whose outcome differs between columns, with reasons. `--write`
puts it in FILE between its markers (fixtures/DYNAMO_RELEASES.md), replacing the last one."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..model.baseline import load_matrix
from ..reports.release_table import render_release_table, replace_block


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "releases",
        help="a release matrix's columns and their differences, as Markdown",
        description=__doc__,
    )
    parser.add_argument("matrix", type=Path, metavar="MATRIX.json", help="a run's matrix.json")
    parser.add_argument(
        "--write",
        type=Path,
        metavar="FILE",
        help="replace the block between the markers in FILE (default: print it)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    lines = render_release_table(load_matrix(args.matrix))
    if args.write is None:
        print("\n".join(lines))
        return 0
    try:
        document = args.write.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"--write {args.write}: cannot read: {exc.strerror}") from exc
    args.write.write_text(replace_block(document, lines), encoding="utf-8")
    print(f"wrote the release matrix of {args.matrix} into {args.write}")
    return 0
