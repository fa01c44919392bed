"""`rl-conformance`: one subcommand per module.

rl-conformance run                                  the four fake deployments
rl-conformance run --frontend URL --rl-url URL --backend vllm [--model M]
rl-conformance diff OLD.json NEW.json               regressions since a baseline (exit 1 on any)
rl-conformance baseline BASELINE_DIR REPORT_DIR     a nightly's diff, and the baseline kept
rl-conformance releases MATRIX.json [--write FILE]  a release matrix's columns and differences
rl-conformance report DIR                           a killed run's reports, from its journal
rl-conformance check-record FILE                    a dynamo.rl.validation.v1 record's rules
rl-conformance verify-bundle DIR --sha256 DIGEST    a report directory against its bundle.json
rl-conformance validate SCHEMA FILE                 a captured JSON body or SSE transcript
rl-conformance capabilities                         the capability registry
rl-conformance coverage                             the spec's sentences and what judges them
rl-conformance kill-matrix                          every named fault of our fakes
rl-conformance passthrough                          engine faults through the real frontend
rl-conformance install-dynamo                       the real Dynamo, in its own environment
rl-conformance install-vllm                         the real Dynamo with vLLM on CPU, likewise
rl-conformance install-sglang                       the real Dynamo with SGLang on CPU, likewise
rl-conformance certify-adapter MODULE:FACTORY       an RL framework's rollout client
rl-conformance profiles [run's deployment flags]    will verl, NeMo RL, slime, prime-rl work here
rl-conformance generation-costs                     measure each test's generation requests
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import sys
import threading
import traceback
from typing import NoReturn

from ..errors import ConfigurationError
from ..redaction import console, redact
from ..version import __version__
from . import (
    baseline,
    capabilities,
    certify_adapter,
    coverage,
    diff,
    evidence,
    generation_costs,
    install_dynamo,
    install_sglang,
    install_vllm,
    kill_matrix,
    passthrough,
    profiles,
    releases,
    report,
    run,
    validate,
)

EXIT_USAGE = 2
COMMANDS = (
    run,
    validate,
    capabilities,
    coverage,
    kill_matrix,
    passthrough,
    install_dynamo,
    install_vllm,
    install_sglang,
    certify_adapter,
    profiles,
    diff,
    baseline,
    releases,
    report,
    evidence,
    generation_costs,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rl-conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(commands)
    for subcommand in commands.choices.values():
        subcommand.allow_abbrev = False  # `--allow-mutation` is a typo, not `--allow-mutations`
    return parser


def subcommand_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            chosen: argparse.ArgumentParser = action.choices[name]
            return chosen
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; everything it prints passes through the redactor (`redaction`)."""
    with console():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported with the subcommand's own usage, not the top-level one
        subcommand_parser(parser, args.command).error(
            f"unrecognized arguments: {' '.join(unknown)}"
        )
    try:
        code: int = args.handler(args)
        return code
    except ConfigurationError as exc:
        print(f"rl-conformance: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("rl-conformance: interrupted", file=sys.stderr)
        return 130


def command() -> NoReturn:
    """`rl-conformance` and `python -m rl_conformance`: `main`, then the process's exit. Once the
    exit handlers have run (temporary directories, logging), the standard streams are flushed
    and no other thread is left, the process ends at once: the interpreter's teardown would
    only free every object the run made (about 90 ms of a default run of 5 s). With a thread
    still running, the exit is the usual one, which waits for it. A harness bug's traceback is
    printed redacted, as everything else (the interpreter's own would not be)."""
    try:
        code = main()
    except Exception:
        sys.stderr.write(redact(traceback.format_exc()))
        code = 1
    if threading.active_count() == 1:
        atexit._run_exitfuncs()
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


__all__ = ["COMMANDS", "EXIT_USAGE", "build_parser", "command", "main"]
