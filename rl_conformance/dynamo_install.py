"""Installs the real Dynamo (frontend, RL listener, mocker) into its own virtual environment.

`pip install ai-dynamo==1.6.1` fails on a machine that reaches only package registries: its
dependency `aisimulate` is a placeholder that downloads from elsewhere, and only the planner and
profiler import it. So the two Dynamo wheels are installed without dependencies, then every
unconditional requirement their metadata declares, except `aisimulate`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from .errors import LaunchError

DYNAMO_VERSION = "1.6.1"
PACKAGES = ("ai-dynamo", "ai-dynamo-runtime")
SKIPPED_REQUIREMENTS = frozenset({"aisimulate"})

_LIST_REQUIREMENTS = """
import importlib.metadata as metadata, re, sys
skip = set(sys.argv[2:])
seen = []
for name in sys.argv[1].split(","):
    for requirement in metadata.requires(name) or []:
        if "extra ==" in requirement:
            continue
        project = re.split(r"[ ;<>=!~\\[(]", requirement, maxsplit=1)[0].lower()
        if project in skip or project.replace("_", "-") in skip:
            continue
        seen.append(requirement.split(";")[0].strip())
print("\\n".join(sorted(set(seen))))
"""


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def install(venv: Path, version: str = DYNAMO_VERSION, *, quiet: bool = True) -> Path:
    """Create `venv` (if needed) and install Dynamo into it; returns its interpreter."""
    started = time.monotonic()
    python = venv_python(venv)
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(venv)], "create the virtual environment")
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    if quiet:
        pip.append("--quiet")
    _run(
        [*pip, "--no-deps", *(f"{name}=={version}" for name in PACKAGES)],
        "install the Dynamo wheels",
    )
    listed = _run(
        [str(python), "-c", _LIST_REQUIREMENTS, ",".join(PACKAGES), *SKIPPED_REQUIREMENTS],
        "read Dynamo's requirements",
    )
    requirements = [line for line in listed.splitlines() if line.strip()]
    _run([*pip, *requirements], "install Dynamo's requirements")
    print(
        f"installed ai-dynamo {version} into {venv} in {time.monotonic() - started:.0f} s "
        f"({len(requirements)} requirements; skipped: {', '.join(sorted(SKIPPED_REQUIREMENTS))})"
    )
    return python


def _run(command: list[str], what: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LaunchError(
            f"could not {what}: {' '.join(command[:6])} ... exited "
            f"{done.returncode}\n{done.stderr[-3000:]}"
        )
    return done.stdout
