"""Shared wiring for the suite's own tests: access to a real Dynamo installation.

Tests that need the real Dynamo never skip silently. Without an installation they skip with a
loud reason where one was given ($RL_CONFORMANCE_NO_DYNAMO or $RL_CONFORMANCE_NO_VLLM, set by
.ci/run when an install failed), fail in CI, and skip with instructions on a developer machine.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rl_conformance.launchers.dynamo import find_dynamo_python

_SKIPPED: list[str] = []
_NO_VLLM: list[str] = []
_NO_BROWSER: list[str] = []


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


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The environment of `rl-conformance install-vllm` (real Dynamo with vLLM on CPU); a loud
    skip where it could not be installed, a failure in CI where nobody said why."""
    python = find_dynamo_python(vllm=True)
    if python is not None:
        return python
    reason = os.environ.get("RL_CONFORMANCE_NO_VLLM")
    if reason:
        _NO_VLLM.append(reason)
        pytest.skip(f"REAL vLLM NOT AVAILABLE: {reason}")
    if os.environ.get("CI"):
        pytest.fail(
            "vLLM is not installed although this is CI: .ci/run must run "
            "`rl-conformance install-vllm` (or set RL_CONFORMANCE_NO_VLLM=<why>)"
        )
    _NO_VLLM.append("not installed on this machine")
    pytest.skip("real vLLM not installed: run `rl-conformance install-vllm` first")


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's headless Chromium for the HTML report's browser test; a loud skip without it."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    reason = os.environ.get("RL_CONFORMANCE_NO_CHROMIUM") or "no chromium on PATH"
    _NO_BROWSER.append(reason)
    pytest.skip(f"CHROMIUM NOT AVAILABLE: {reason} (apt-get install chromium)")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _NO_BROWSER:
        terminalreporter.section("HTML BROWSER TEST SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(f"reason: {_NO_BROWSER[0]}", red=True)
    if _SKIPPED:
        terminalreporter.section("REAL DYNAMO TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(f"reason: {_SKIPPED[0]}", red=True)
    if _NO_VLLM:
        terminalreporter.section("REAL vLLM TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(f"reason: {_NO_VLLM[0]}", red=True)
