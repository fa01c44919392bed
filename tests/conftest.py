"""Shared wiring for the suite's own tests: access to a real Dynamo installation.

Tests that need the real Dynamo never skip silently. Without an installation they skip with a
loud reason where one was given ($RL_CONFORMANCE_NO_DYNAMO, $RL_CONFORMANCE_NO_VLLM or
$RL_CONFORMANCE_NO_SGLANG, set by .ci/run when an install failed), fail in CI, and skip with
instructions on a developer machine.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rl_conformance.launchers.dynamo_python import find_dynamo_python

_SKIPPED: list[str] = []
_NO_VLLM: list[str] = []
_NO_SGLANG: list[str] = []
_NO_SGLANG17: list[str] = []
SGLANG17_PYTHON_ENV = "RL_CONFORMANCE_SGLANG17_PYTHON"
SGLANG17_VENVS = (".venv-sglang17", ".venv-sglang-1.7.0.dev20261026-0.5.23")
"""Where `rl-conformance install-sglang --dynamo-version 1.7.0.dev20261026 --sglang-version
0.5.23` puts the 1.7 pair: CI's `--venv .venv-sglang17`, else the installer's default."""
_NO_BROWSER: list[str] = []
_NO_NGINX: list[str] = []


def installed_python(
    vllm: bool, variable: str, command: str, skipped: list[str], *, sglang: bool = False
) -> Path:
    """The environment `command` makes; a loud skip where $`variable` says why it could not
    be installed, a failure in CI where nobody said why, a skip with the command elsewhere."""
    python = find_dynamo_python(vllm=vllm, sglang=sglang)
    if python is not None:
        return python
    what = "vLLM" if vllm else "SGLang" if sglang else "Dynamo"
    reason = os.environ.get(variable)
    if reason:
        skipped.append(reason)
        pytest.skip(f"REAL {what.upper()} NOT AVAILABLE: {reason}")
    if os.environ.get("CI"):
        pytest.fail(
            f"{what} is not installed although this is CI: .ci/run must run "
            f"`{command}` (or set {variable}=<why>)"
        )
    skipped.append("not installed on this machine")
    pytest.skip(f"real {what} not installed: run `{command}` first")


@pytest.fixture(scope="session")
def dynamo_python() -> Path:
    return installed_python(
        False, "RL_CONFORMANCE_NO_DYNAMO", "rl-conformance install-dynamo", _SKIPPED
    )


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The environment of `rl-conformance install-vllm`: real Dynamo with vLLM on CPU."""
    return installed_python(True, "RL_CONFORMANCE_NO_VLLM", "rl-conformance install-vllm", _NO_VLLM)


@pytest.fixture(scope="session")
def sglang_python() -> Path:
    """The environment of `rl-conformance install-sglang`: real Dynamo with SGLang on CPU."""
    return installed_python(
        False,
        "RL_CONFORMANCE_NO_SGLANG",
        "rl-conformance install-sglang",
        _NO_SGLANG,
        sglang=True,
    )


@pytest.fixture(scope="session")
def sglang17_python() -> Path:
    """The environment of the 1.7 pair, SGLang 0.5.23 with Dynamo 1.7.0.dev20261026:
    $RL_CONFORMANCE_SGLANG17_PYTHON, else one of `SGLANG17_VENVS` here or in the checkout.
    `.ci/run` installs it (about 3 minutes more); where that fails, or outside CI, its absence is
    a loud skip, never a failure."""
    checkout = Path(__file__).resolve().parents[1]
    candidates = [os.environ.get(SGLANG17_PYTHON_ENV)] + [
        str(root / venv / "bin/python")
        for venv in SGLANG17_VENVS
        for root in (Path.cwd(), checkout)
    ]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return Path(candidate)
    reason = os.environ.get("RL_CONFORMANCE_NO_SGLANG17") or (
        "run `rl-conformance install-sglang --dynamo-version 1.7.0.dev20261026 --sglang-version "
        f"0.5.23 --venv .venv-sglang17` or set {SGLANG17_PYTHON_ENV}"
    )
    _NO_SGLANG17.append(reason)
    pytest.skip(f"REAL SGLANG 0.5.23 + DYNAMO 1.7 NOT AVAILABLE: {reason}")


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


@pytest.fixture(scope="session")
def nginx() -> str:
    """Debian's nginx, the real ingress of the TLS and proxy tests; a loud skip without it."""
    found = shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx",) if os.access(path, os.X_OK)), None
    )
    if found:
        return found
    reason = os.environ.get("RL_CONFORMANCE_NO_NGINX") or "no nginx on PATH"
    _NO_NGINX.append(reason)
    pytest.skip(f"NGINX NOT AVAILABLE: {reason} (apt-get install nginx)")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _NO_NGINX:
        terminalreporter.section("INGRESS (nginx) TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(f"reason: {_NO_NGINX[0]}", red=True)
    if _NO_BROWSER:
        terminalreporter.section("HTML BROWSER TEST SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(f"reason: {_NO_BROWSER[0]}", red=True)
    if _SKIPPED:
        terminalreporter.section("REAL DYNAMO TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(f"reason: {_SKIPPED[0]}", red=True)
    if _NO_VLLM:
        terminalreporter.section("REAL vLLM TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(f"reason: {_NO_VLLM[0]}", red=True)
    if _NO_SGLANG:
        terminalreporter.section("REAL SGLang TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(f"reason: {_NO_SGLANG[0]}", red=True)
    if _NO_SGLANG17:
        terminalreporter.section(
            "REAL SGLang 0.5.23 + Dynamo 1.7 TESTS SKIPPED", sep="!", red=True, bold=True
        )
        terminalreporter.write_line(f"reason: {_NO_SGLANG17[0]}", red=True)
