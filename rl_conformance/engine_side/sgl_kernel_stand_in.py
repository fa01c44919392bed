"""`sgl_kernel` for SGLang on a CPU, installed as the package's `__init__.py` by
`rl-conformance install-sglang` (the project ships no CPU wheel).

With `SGLANG_USE_CPU_ENGINE=1`, SGLang imports a handful of `*_cpu` kernels at module level, from
this package and from `torch.ops.sgl_kernel`; for a dense model on a CPU without AMX it calls only
`assign_req_to_token_pool_cpu`, written here in torch after the Triton kernel it replaces
(`sglang/srt/mem_cache/allocation.py`). Every other kernel SGLang reads resolves, and raises
naming itself when called, so an engine path that needs a real kernel says which one instead of
computing something else. The installer imports this package at interpreter start-up when that
variable is set (a `.pth` file), so that `torch.ops.sgl_kernel` resolves before SGLang's modules
read it.
"""

from __future__ import annotations

from typing import Any

import torch

__version__ = "0.0.0+rl-conformance-stand-in"


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """Row `req_pool_indices[i]` of `req_to_token`, positions `start_offset[i]` up to
    `end_offset[i]`, takes the next `end - start` entries of `out_cache_loc`, in batch order."""
    del pool_len
    taken = 0
    for index, start, end in zip(
        req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist(), strict=True
    ):
        length = end - start
        req_to_token[index, start:end] = out_cache_loc[taken : taken + length].to(
            req_to_token.dtype
        )
        taken += length


def _missing(where: str, name: str) -> Any:
    def missing(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{where}.{name}: the CPU stand-in of rl-conformance implements only "
            "assign_req_to_token_pool_cpu; this engine path needs the real kernel"
        )

    missing.__name__ = name
    return missing


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _missing("sgl_kernel", name)


class _Operators:
    """`torch.ops.sgl_kernel`: the `*_cpu` operators SGLang reads at module level resolve, and
    raise when called; any other is absent, as SGLang's probes of the AMX backend
    (`hasattr(torch.ops.sgl_kernel, "convert_weight_packed")`) and of optional kernels expect, so
    it takes its torch paths."""

    def __getattr__(self, name: str) -> Any:
        if not name.endswith("_cpu"):
            raise AttributeError(name)
        return _missing("torch.ops.sgl_kernel", name)


setattr(torch.ops, "sgl_kernel", _Operators())  # noqa: B010 (torch.ops creates it on first read)
