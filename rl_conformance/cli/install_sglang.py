"""`rl-conformance install-sglang`: the real Dynamo with the real SGLang engine (CPU) in its own
virtual environment, for `--launch dynamo-sglang`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import LaunchError
from ..launchers.dynamo_install import DYNAMO_VERSION
from ..launchers.dynamo_python import SGLANG_VENV
from ..launchers.sglang_install import SGLANG_VERSION, install_sglang, sglang_venv_name


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "install-sglang",
        help="install the real Dynamo and SGLang (on CPU) into their own virtual environment",
    )
    parser.add_argument(
        "--venv",
        default=None,
        type=Path,
        metavar="DIR",
        help=f"the virtual environment to create or reuse (default ./{SGLANG_VENV} for Dynamo "
        f"{DYNAMO_VERSION} with SGLang {SGLANG_VERSION}, else ./{SGLANG_VENV}-DYNAMO-SGLANG)",
    )
    parser.add_argument(
        "--sglang-version",
        default=SGLANG_VERSION,
        metavar="VERSION",
        help=f"the sglang release (default {SGLANG_VERSION}, the one ai-dynamo "
        f"{DYNAMO_VERSION} pins)",
    )
    parser.add_argument(
        "--dynamo-version",
        default=DYNAMO_VERSION,
        metavar="VERSION",
        help=f"the ai-dynamo and ai-dynamo-runtime release or build from PyPI (default "
        f"{DYNAMO_VERSION})",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    venv = args.venv or Path(sglang_venv_name(args.dynamo_version, args.sglang_version))
    try:
        python = install_sglang(
            venv.absolute(), sglang=args.sglang_version, dynamo=args.dynamo_version
        )
    except LaunchError as exc:
        print(f"rl-conformance: {exc}", file=sys.stderr)
        return 1
    print(f"use it with: rl-conformance run --launch dynamo-sglang --dynamo-python {python}")
    return 0
