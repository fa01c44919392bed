"""The native generate routes.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import COMPAT, Backend, Support, row

NATIVE_ROUTE = row(
    "generate.native_route",
    "Native RL generation route",
    COMPAT,
    "Native RL generation route: vLLM experimental unary route; SGLang streaming /generate; "
    "TensorRT-LLM none",
    {
        Backend.VLLM: Support.EXPERIMENTAL,
        Backend.SGLANG: Support.SUPPORTED,
        Backend.TRTLLM: Support.UNSUPPORTED,
    },
    flipped_by=("native_route_sequence_differs",),
)

SGLANG_LOGPROB_ALIGNMENT = row(
    "generate.sglang_logprob_alignment",
    "Native SGLang logprob triples align with output_ids",
    "Choose a Request Interface",
    "Native SGLang token streaming: POST /generate preserves supported SGLang token-input and "
    "streaming response fields.",
    {
        Backend.VLLM: Support.UNSUPPORTED,
        Backend.SGLANG: Support.SUPPORTED,
        Backend.TRTLLM: Support.UNSUPPORTED,
    },
    flipped_by=("sglang_input_logprob_first_not_null", "sglang_output_logprob_id_mismatch"),
)

ROWS = (NATIVE_ROUTE, SGLANG_LOGPROB_ALIGNMENT)
"""The rows in the order the matrix shows them."""
