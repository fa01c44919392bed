"""Installs the real Dynamo with the real SGLang engine on CPU into its own virtual environment.

`pip install ai-dynamo[sglang]==1.6.1` (or `sglang==0.5.21`) cannot work on a CPU-only machine:
SGLang declares about twenty CUDA-only requirements (kernels, FlashInfer, DeepEP, cuda-python
...) and a CUDA build of torch. What works: the CPU build of torch first, then the SGLang and
Dynamo wheels without dependencies, then every requirement their metadata declares for this
platform except the CUDA-only ones (`CUDA_ONLY`), with the non-CUDA part of `ai-dynamo[sglang]`,
and `dill` and `soundfile`, which SGLang imports whatever it serves.

`sgl_kernel` has no CPU wheel; with `SGLANG_USE_CPU_ENGINE=1` a dense model on a CPU without AMX
needs one of its kernels, written in torch (`engine_side/sgl_kernel_stand_in.py`). torchvision
gets the guard `install-vllm` gives it (`dynamo_install.patch_torchvision`).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ..engine_side import SGL_KERNEL_STAND_IN
from ..errors import LaunchError
from .dynamo_install import (
    DYNAMO_VERSION,
    PACKAGES,
    SKIPPED_REQUIREMENTS,
    Steps,
    patch_torchvision,
    prepare_venv,
    relaxed,
    run_command,
)
from .dynamo_python import SGLANG_VENV

SGLANG_VERSION = "0.5.21"
"""The release `ai-dynamo[sglang]==1.6.1` pins."""
TORCH = "torch==2.13.0"
"""The torch SGLang 0.5.21 pins; the CPU build where the index offers it. Every release gets
this one, whatever it pins: 0.5.23 pins 2.14.1, whose only build on the registry is the CUDA
one (with about 4 GB of CUDA libraries), and SGLang's CPU path runs on 2.13.0 (measured)."""
CUDA_ONLY = frozenset(
    {
        "apache-tvm-ffi",
        "cuda-python",
        "cuda-tile",
        "flash-attn-4",
        "flashinfer-python",
        "humming-kernels",
        "nvidia-cutlass-dsl",
        "nvidia-mathdx",
        "nvshmem4py-cu13",
        "quack-kernels",
        "sgl-deep-ep",
        "sgl-deep-gemm",
        "sgl-flash-mla",
        "sglang-kernel",
        "tilelang",
        "tokenspeed-mla",
        "torch-memory-saver",
        "torchaudio",
        "torchcodec",
    }
)
"""SGLang's requirements that hold CUDA code only (or, for torchaudio and torchcodec, extensions
linked against CUDA torch that cannot load beside the CPU build). Met in 0.5.21 or 0.5.23."""
OWN_TORCH = frozenset({"torch"})
"""Left out of the requirements read from SGLang: `TORCH` is installed instead."""
EXTRA_REQUIREMENTS = ("accelerate>=0.17.0", "blake3>=1.0.0,<2.0.0", "uvloop", "dill", "soundfile")
"""The non-CUDA part of `ai-dynamo[sglang]`, and what SGLang imports without declaring it."""
STAND_IN_PTH = "rl_conformance_sgl_kernel.pth"
"""Imports the stand-in at start-up in processes that run SGLang on CPU (`SGLANG_USE_CPU_ENGINE=1`,
which makes SGLang's `is_cpu()` true), before any SGLang module reads `torch.ops.sgl_kernel`."""

_LIST_REQUIREMENTS = """
import re, sys
import importlib.metadata as metadata
from pip._vendor.packaging.requirements import Requirement
skip = set(sys.argv[2:])
seen = set()
for name in sys.argv[1].split(","):
    for line in metadata.requires(name) or []:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if re.sub(r"[-_.]+", "-", requirement.name).lower() in skip:
            continue
        requirement.marker = None
        seen.add(str(requirement))
print("\\n".join(sorted(seen)))
"""


def sglang_venv_name(dynamo: str, sglang: str) -> str:
    """`.venv-sglang` for the pinned pair, else one directory per combination."""
    if (dynamo, sglang) == (DYNAMO_VERSION, SGLANG_VERSION):
        return SGLANG_VENV
    return f"{SGLANG_VENV}-{dynamo}-{sglang}"


def install_sglang(
    venv: Path,
    sglang: str = SGLANG_VERSION,
    dynamo: str = DYNAMO_VERSION,
    *,
    quiet: bool = True,
) -> Path:
    """Dynamo `dynamo` and SGLang `sglang` for CPU in `venv`; returns its interpreter once
    `dynamo.sglang` imports there."""
    started = time.monotonic()
    steps = Steps(8)
    python, pip = prepare_venv(venv, steps, quiet=quiet)
    steps.run([*pip, TORCH], f"install {TORCH} (the CPU build)")
    wheels = [f"sglang=={sglang}", *(f"{name}=={dynamo}" for name in PACKAGES)]
    steps.run([*pip, "--no-deps", *wheels], f"install the {', '.join(wheels)} wheels")
    listed = steps.run(
        [
            str(python),
            "-c",
            _LIST_REQUIREMENTS,
            ",".join(("sglang", *PACKAGES)),
            *sorted(SKIPPED_REQUIREMENTS | CUDA_ONLY | OWN_TORCH),
        ],
        "read SGLang's and Dynamo's requirements",
    )
    requirements = [relaxed(line) for line in listed.splitlines() if line.strip()]
    steps.run(
        [*pip, TORCH, *requirements, *EXTRA_REQUIREMENTS],
        f"install their {len(requirements)} requirements but the CUDA-only ones, with "
        f"{', '.join(EXTRA_REQUIREMENTS)} (the longest step: minutes, downloads included)",
    )
    steps.announce("install the sgl_kernel stand-in")
    _install_stand_in(python)
    steps.announce("patch torchvision's fake-kernel registrations")
    patch_torchvision(python)
    steps.run(
        [
            str(python),
            "-c",
            "import os; os.environ.update(SGLANG_USE_CPU_ENGINE='1'); "
            "import dynamo.sglang.main, sglang.srt.mem_cache.allocation, transformers",
        ],
        "import dynamo.sglang in the new environment",
    )
    print(
        f"SGLang {sglang} with ai-dynamo {dynamo} ready in {venv} in "
        f"{time.monotonic() - started:.0f} s ({len(requirements)} requirements; skipped as "
        f"CUDA-only: {', '.join(sorted(CUDA_ONLY))})"
    )
    return python


def _install_stand_in(python: Path) -> None:
    located = run_command(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        "locate site-packages",
    ).strip()
    package = Path(located) / "sgl_kernel"
    if (package / "__init__.py").exists() and "rl-conformance" not in (
        package / "__init__.py"
    ).read_text():
        raise LaunchError(f"{package} holds a real sgl_kernel: not replaced by the CPU stand-in")
    package.mkdir(exist_ok=True)
    shutil.copy(SGL_KERNEL_STAND_IN, package / "__init__.py")
    (Path(located) / STAND_IN_PTH).write_text(
        "import os; os.environ.get('SGLANG_USE_CPU_ENGINE') == '1' and __import__('sgl_kernel')\n"
    )
