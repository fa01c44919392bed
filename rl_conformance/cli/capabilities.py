"""`rl-conformance capabilities`: every capability with its level and documented support."""

from __future__ import annotations

import argparse
from typing import Any

from ..capabilities import CAPABILITIES


def register(commands: Any) -> None:
    parser = commands.add_parser("capabilities", help="list the capability registry")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    for capability in CAPABILITIES:
        support = ", ".join(
            f"{backend.value}={level.value}" for backend, level in capability.documented.items()
        )
        print(f"{capability.id:36} {capability.level.value:6} {capability.title}  [{support}]")
    return 0
