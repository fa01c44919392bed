"""A mistake on the command line is one sentence with its fix, never the whole usage: an
unknown option or command with the nearest known one ("did you mean --allow-mutations?"), a
value outside its choices with the nearest choice, an argument where an option was meant with
its flag ("did you mean --frontend URL?"), each ending with where `--help` lists the rest.
Exit status 2, as every wrong command (docs/REPORTS.md)."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

EXIT_USAGE = 2
CHOICE = re.compile(
    r"argument (?P<flag>[^:]+): invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)"
)
URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


class Parser(argparse.ArgumentParser):
    """argparse, with its complaints in one sentence and a fix (`error`)."""

    def error(self, message: str) -> NoReturn:
        refuse(self, plain(message))


def refuse(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    sys.stderr.write(f"{parser.prog}: {message} ({parser.prog} --help lists every option)\n")
    sys.exit(EXIT_USAGE)


def plain(message: str) -> str:
    """argparse's complaint, with the nearest choice when a value was not one of them."""
    found = CHOICE.fullmatch(message)
    if found is None:
        needs = re.fullmatch(r"argument (\S+): expected (one|at least one) argument", message)
        if needs:
            return f"{needs[1]} needs a value"
        return message.replace("the following arguments are required:", "missing")
    choices = [choice.strip().strip("'") for choice in found["choices"].split(",")]
    return f"{found['flag']}: {found['value']!r} is not one of {', '.join(choices)}" + hint(
        found["value"], choices
    )


def hint(word: str, known: Sequence[str]) -> str:
    """ "; did you mean X?" for the known word nearest `word`, or nothing."""
    nearest = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {nearest[0]}?" if nearest else ""


def options_of(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(option for option in parser._option_string_actions if option.startswith("--"))


def unknown_arguments(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> NoReturn:
    """Refuse what the parser did not know: the first unknown option, with the nearest one."""
    options = [token for token in unknown if token.startswith("-")]
    if options:
        flag = options[0].split("=", 1)[0]
        refuse(parser, f"unknown option {flag}{hint(flag, options_of(parser))}")
    stray(parser, unknown[0])


def stray(parser: argparse.ArgumentParser, token: str) -> NoReturn:
    """An argument where the command takes none: a URL most likely meant a flag."""
    if URL.match(token):
        flags = [flag for flag in ("--frontend", "--rl-url") if flag in options_of(parser)]
        if flags:
            refuse(parser, f"{token} is given without its flag; did you mean {flags[0]} {token}?")
    pytest = "; arguments for pytest go after --" if "pytest_args" in _dests(parser) else ""
    refuse(parser, f"unexpected argument {token!r}{pytest}")


def _dests(parser: argparse.ArgumentParser) -> set[str]:
    return {action.dest for action in parser._actions}


def unknown_command(
    parser: argparse.ArgumentParser, name: str, commands: Sequence[str]
) -> NoReturn:
    sys.stderr.write(
        f"{parser.prog}: unknown command {name!r}{hint(name, commands)} ({parser.prog} --help "
        "lists the commands)\n"
    )
    sys.exit(EXIT_USAGE)


def after_double_dash(argv: Sequence[str]) -> int:
    """How many arguments follow `--` (arguments for pytest, given to `run`)."""
    return len(argv) - list(argv).index("--") - 1 if "--" in argv else 0
