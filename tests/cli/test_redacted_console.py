"""What a command prints passes through the redactor: its messages, a wrong input's, and the
traceback of a harness bug, which the interpreter would otherwise print raw."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SECRET = "console-secret-0123456789"


def test_a_harness_bug_is_printed_redacted() -> None:
    program = textwrap.dedent(
        f"""
        import sys
        from rl_conformance import cli
        from rl_conformance.redaction import REDACTOR

        REDACTOR.add({SECRET!r}, "$CONSOLE_TOKEN")

        def broken(args):
            print("said: {SECRET}")
            raise RuntimeError("quoted {SECRET}")

        parser = cli.build_parser
        def patched():
            built = parser()
            cli.subcommand_parser(built, "coverage").set_defaults(handler=broken)
            return built
        cli.build_parser = patched
        sys.argv = ["rl-conformance", "coverage"]
        cli.command()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert "RuntimeError: quoted $CONSOLE_TOKEN" in done.stderr
    assert "said: $CONSOLE_TOKEN" in done.stdout
    assert SECRET not in done.stdout + done.stderr
