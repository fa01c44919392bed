"""Where the real Dynamo runs from: the interpreter of a virtual environment that holds
`ai-dynamo` (with vLLM or SGLang, for the real engines), found from an explicit path, an
environment variable or the conventional `.venv-*` directories, and the versions of what it has
installed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import fake_backends

from ..errors import LaunchError

PYTHON_ENV = "RL_CONFORMANCE_DYNAMO_PYTHON"
DEFAULT_VENV = ".venv-dynamo"
VLLM_PYTHON_ENV = "RL_CONFORMANCE_VLLM_PYTHON"
VLLM_VENV = ".venv-vllm"
SGLANG_PYTHON_ENV = "RL_CONFORMANCE_SGLANG_PYTHON"
SGLANG_VENV = ".venv-sglang"


def find_dynamo_python(
    explicit: str | None = None, *, vllm: bool = False, sglang: bool = False
) -> Path | None:
    """The interpreter of a virtual environment with ai-dynamo: the explicit path, then
    $RL_CONFORMANCE_DYNAMO_PYTHON, then ./.venv-dynamo, then the checkout's .venv-dynamo. With
    `vllm`, one that also has vLLM: $RL_CONFORMANCE_VLLM_PYTHON and .venv-vllm instead; with
    `sglang`, $RL_CONFORMANCE_SGLANG_PYTHON and .venv-sglang."""
    variable, venv = (
        (VLLM_PYTHON_ENV, VLLM_VENV)
        if vllm
        else (SGLANG_PYTHON_ENV, SGLANG_VENV)
        if sglang
        else (PYTHON_ENV, DEFAULT_VENV)
    )
    candidates = [
        explicit,
        os.environ.get(variable),
        str(Path.cwd() / venv / "bin/python"),
        str(Path(fake_backends.__file__).resolve().parents[1] / venv / "bin/python"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


def dynamo_version(python: Path) -> str:
    return installed_version(python, "ai-dynamo")


def installed_version(python: Path, distribution: str) -> str:
    done = subprocess.run(
        [
            str(python),
            "-c",
            f"import importlib.metadata as m; print(m.version({distribution!r}))",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        raise LaunchError(f"{python} has no {distribution} ({said[0]})")
    return done.stdout.strip()
