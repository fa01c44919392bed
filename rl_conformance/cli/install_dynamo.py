"""`rl-conformance install-dynamo`: the real Dynamo into its own virtual environment."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import LaunchError
from ..launchers.dynamo_install import DYNAMO_VERSION, install


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "install-dynamo", help="install the real Dynamo into its own virtual environment"
    )
    parser.add_argument(
        "--venv",
        default=".venv-dynamo",
        type=Path,
        metavar="DIR",
        help="the virtual environment to create or reuse (default ./.venv-dynamo)",
    )
    parser.add_argument(
        "--version",
        dest="dynamo_version",
        default=DYNAMO_VERSION,
        metavar="VERSION",
        help=f"the ai-dynamo release from PyPI (default {DYNAMO_VERSION})",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    try:
        python = install(args.venv.absolute(), args.dynamo_version)
    except LaunchError as exc:
        print(f"rl-conformance: {exc}", file=sys.stderr)
        return 1
    print(f"use it with: rl-conformance run --launch dynamo-mocker --dynamo-python {python}")
    return 0
