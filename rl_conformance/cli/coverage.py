"""`rl-conformance coverage`: each normative sentence of the spec with the capabilities that judge
it, or why none does; `--markdown` writes the spec coverage (`docs/COVERAGE.md`) from
`fixtures/spec/requirements.json` (or `--requirements PATH`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..model.capabilities import CAPABILITIES
from ..reports.coverage import (
    REQUIREMENTS,
    counts,
    load_requirements,
    render_coverage,
    sentences_of,
    status,
)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "coverage", help="the spec's sentences and what judges them", description=__doc__
    )
    parser.add_argument("--markdown", action="store_true", help="the spec coverage document")
    parser.add_argument(
        "--requirements",
        type=Path,
        default=REQUIREMENTS,
        help=f"the sentences, as JSON (default {REQUIREMENTS.as_posix()})",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    try:
        document = load_requirements(args.requirements)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"--requirements {args.requirements}: {exc}") from exc
    if args.markdown:
        print(render_coverage(document, CAPABILITIES), end="")
        return 0
    sentences = sentences_of(document)
    for sentence in sentences:
        judges = ", ".join(sentence["judged_by"]) or sentence["not_covered"] or "-"
        print(f"{sentence['id']:14} {status(sentence):12} {judges}")
    total = counts(sentences)
    print(
        f"{total['sentences']} sentences: {total['covered']} covered, {total['partly']} partly "
        f"covered, {total['not_covered']} not covered"
    )
    return 0
