"""Scripts run by path in an environment with torch and transformers (the vLLM environment of
`rl-conformance install-vllm`, or any the user names), never imported by the harness: the harness
itself does not depend on torch. Each prints one JSON document on stdout."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
MAKE_CHECKPOINTS = HERE / "make_checkpoints.py"
REFERENCE_POLICY = HERE / "reference_policy.py"
SGL_KERNEL_STAND_IN = HERE / "sgl_kernel_stand_in.py"

__all__ = ["MAKE_CHECKPOINTS", "REFERENCE_POLICY", "SGL_KERNEL_STAND_IN"]
