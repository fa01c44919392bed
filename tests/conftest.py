"""Shared wiring for the suite's own tests: access to a real Dynamo installation.

Tests that need the real Dynamo never skip silently. Without an installation they skip with a
loud reason where one was given ($RL_CONFORMANCE_NO_DYNAMO, set by .ci/run when the install
failed), fail in CI, and skip with instructions on a developer machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rl_conformance.launchers.dynamo import find_dynamo_python

_SKIPPED: list[str] = []


@pytest.fixture(scope="session")
def dynamo_python() -> Path:
    python = find_dynamo_python()
    if python is not None:
        return python
    reason = os.environ.get("RL_CONFORMANCE_NO_DYNAMO")
    if reason:
        _SKIPPED.append(reason)
        pytest.skip(f"REAL DYNAMO NOT AVAILABLE: {reason}")
    if os.environ.get("CI"):
        pytest.fail(
            "ai-dynamo is not installed although this is CI: .ci/run must run "
            "`rl-conformance install-dynamo` (or set RL_CONFORMANCE_NO_DYNAMO=<why>)"
        )
    _SKIPPED.append("not installed on this machine")
    pytest.skip("real Dynamo not installed: run `rl-conformance install-dynamo` first")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _SKIPPED:
        terminalreporter.section("REAL DYNAMO TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(f"reason: {_SKIPPED[0]}", red=True)
