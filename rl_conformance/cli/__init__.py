"""`rl-conformance`: one subcommand per module.

rl-conformance run                                  the four fake deployments
rl-conformance run --frontend URL --rl-url URL --backend vllm [--model M]
rl-conformance diff OLD.json NEW.json               regressions since a baseline (exit 1 on any)
rl-conformance baseline BASELINE_DIR REPORT_DIR     a nightly's diff, and the baseline kept
rl-conformance releases MATRIX.json [--write FILE]  a release matrix's columns and differences
rl-conformance report DIR                           a killed run's reports, from its journal
rl-conformance check-record FILE                    a dynamo.rl.validation.v1 record's rules
rl-conformance verify-bundle DIR --sha256 DIGEST    a report directory against its bundle.json
rl-conformance check-artifact-bundle DIR            its artifact-bundle.json, by Dynamo's rules
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

import importlib
import sys
from typing import TYPE_CHECKING, NoReturn

from . import process

if TYPE_CHECKING:
    import argparse

EXIT_USAGE = 2
COMMAND_MODULES = (
    "run",
    "validate",
    "capabilities",
    "coverage",
    "kill_matrix",
    "passthrough",
    "install_dynamo",
    "install_vllm",
    "install_sglang",
    "certify_adapter",
    "profiles",
    "diff",
    "baseline",
    "releases",
    "report",
    "evidence",
    "generation_costs",
)
"""One module per command, imported when the parser is built: the process handles Ctrl-C
and closed pipes (`process.guard`) before the commands' imports take their second."""


def build_parser() -> argparse.ArgumentParser:
    from ..version import __version__
    from .mistakes import Parser

    parser = Parser(
        prog="rl-conformance",
        description=__doc__,
        formatter_class=_raw_description(),
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f".{name}", __name__).register(commands)
    for subcommand in commands.choices.values():
        subcommand.allow_abbrev = False  # `--allow-mutation` is a typo, not `--allow-mutations`
    return parser


def _raw_description() -> type[argparse.HelpFormatter]:
    import argparse

    return argparse.RawDescriptionHelpFormatter


def subcommand_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            chosen: argparse.ArgumentParser = action.choices[name]
            return chosen
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; everything it prints passes through the redactor (`redaction`)."""
    try:
        from ..errors import ConfigurationError
        from ..redaction import console

        with console():
            try:
                return _main(list(sys.argv[1:] if argv is None else argv), ConfigurationError)
            except KeyboardInterrupt:
                print("rl-conformance: interrupted", file=sys.stderr)
                return process.stops.exit_status() or 130
    except KeyboardInterrupt:  # before the redactor was in place, or as it was taken away
        print("rl-conformance: interrupted", file=sys.stderr)
        return process.stops.exit_status() or 130


def _main(argv: list[str], refused: type[Exception]) -> int:
    from . import mistakes

    parser = build_parser()
    commands = _command_names(parser)
    if not argv:
        mistakes.refuse(parser, "name a command: `rl-conformance run` tests our fakes")
    if not argv[0].startswith("-") and argv[0] not in commands:
        mistakes.unknown_command(parser, argv[0], commands)
    args, unknown = parser.parse_known_args(argv)
    chosen = subcommand_parser(parser, args.command)
    if unknown:  # reported with the subcommand's own options, not the top-level ones
        mistakes.unknown_arguments(chosen, unknown)
    extra = getattr(args, "pytest_args", None)
    if extra:  # only what follows `--` is pytest's
        strays = extra[: len(extra) - mistakes.after_double_dash(argv)]
        if strays:
            mistakes.stray(chosen, strays[0])
    try:
        code: int = args.handler(args)
        return code
    except refused as exc:
        print(f"rl-conformance: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _command_names(parser: argparse.ArgumentParser) -> list[str]:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def command() -> NoReturn:
    """`rl-conformance` and `python -m rl_conformance`: `main`, then the process's exit, with
    the status a stop signal or a closed pipe gives (`process`). Once the exit handlers have
    run (temporary directories, logging), the standard streams are flushed and no other thread
    is left, the process ends at once: the interpreter's teardown would only free every object
    the run made (about 90 ms of a default run of 5 s). With a thread still running, the exit
    is the usual one, which waits for it. A harness bug's traceback is printed redacted, as
    everything else (the interpreter's own would not be)."""
    import os
    import threading

    pipe_closed = False
    try:
        process.guard()
        code = main()
    except KeyboardInterrupt:  # a stop that came between main's own handlers
        code = process.stops.exit_status() or 130
    except BrokenPipeError:
        process.closed_pipe()
        code, pipe_closed = 0, True
    except Exception:
        import traceback

        from ..redaction import redact

        sys.stderr.write(redact(traceback.format_exc()))
        code = 1
    process.stops.now_ending()  # a stop from here on is noted: the process is ending anyway
    code = process.final_status(code, pipe_closed=pipe_closed, said=True)
    if threading.active_count() == 1:
        import atexit

        atexit._run_exitfuncs()
        process.flush_quietly()
        os._exit(process.final_status(code, said=True))
    sys.exit(process.final_status(code, said=True))


__all__ = ["COMMAND_MODULES", "EXIT_USAGE", "build_parser", "command", "main"]
