"""The pytest plugin is inert unless a run is configured, and works by `-p` with `--rl-*`
options as well as through `run()`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rl_conformance.plugin.runner import suites_dir

UNRELATED = """
def test_unrelated(request):
    assert "rl_target" not in request.fixturenames
"""


def pytest_in(directory: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments]
    return subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=300)


def test_an_unrelated_pytest_session_never_sees_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "test_unrelated.py").write_text(UNRELATED)
    done = pytest_in(tmp_path, "test_unrelated.py", "--fixtures")
    assert "rl_target" not in done.stdout and "rl-conformance" not in done.stdout


def test_loaded_without_options_it_stays_inert(tmp_path: Path) -> None:
    (tmp_path / "test_unrelated.py").write_text(UNRELATED)
    done = pytest_in(tmp_path, "-p", "rl_conformance.plugin", "test_unrelated.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "conformance matrix" not in done.stdout


def test_loaded_with_options_it_runs_the_suites(tmp_path: Path) -> None:
    report = tmp_path / "report"
    done = pytest_in(
        tmp_path,
        "-p",
        "rl_conformance.plugin",
        str(suites_dir() / "test_token_authority.py"),
        "--rootdir",
        str(suites_dir()),
        "--rl-fake",
        "trtllm",
        "--rl-capability",
        "tokens.token_input",
        "--rl-report-dir",
        str(report),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    matrix = json.loads((report / "matrix.json").read_text())
    assert matrix["summary"]["pass"] == 1
