"""Log probabilities aligned with the tokens they score.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import RETURNS, TOKENS, Backend, Support, row

SELECTED_ALIGNMENT = row(
    "logprobs.selected_alignment",
    "Selected logprobs align with the generated ids",
    TOKENS,
    "Selected log probabilities match those token IDs in length and order.",
    asserts="selected logprobs match the generated token ids in length and order",
    flipped_by=("logprobs_absent", "logprobs_reordered", "selected_logprobs_one_short"),
)

FINITE_NONPOSITIVE = row(
    "logprobs.finite_nonpositive",
    "Logprobs are finite and <= 0",
    TOKENS,
    "Selected log probabilities match those token IDs in length and order.",
    asserts="every logprob is a finite number <= 0",
    flipped_by=("nan_logprob", "positive_logprob"),
)

TOPK_CONSISTENT = row(
    "logprobs.topk_consistent",
    "Top-k logprobs are consistent with the selected token",
    RETURNS,
    "Check support and alignment on the exact backend and response path.",
    asserts=(
        "top logprobs hold at most k+1 entries (a chat list at least k), include the selected "
        "token, and are ordered"
    ),
    flipped_by=("chat_top_logprobs_short", "topk_missing_selected"),
)

PROMPT_ALIGNMENT = row(
    "logprobs.prompt_alignment",
    "Prompt logprobs keep position 0 undefined, unshifted",
    TOKENS,
    "Prompt log probabilities preserve undefined positions instead of shifting alignment.",
    {
        Backend.VLLM: Support.SUPPORTED,
        Backend.SGLANG: Support.TOPOLOGY_DEPENDENT,
        Backend.TRTLLM: Support.UNDOCUMENTED,
    },
    asserts="prompt logprobs: one entry per prompt token, position 0 undefined, never shifted",
    flipped_by=("prompt_logprobs_leading_null_dropped", "prompt_logprobs_shifted_by_one"),
)

ROWS = (SELECTED_ALIGNMENT, FINITE_NONPOSITIVE, TOPK_CONSISTENT, PROMPT_ALIGNMENT)
"""The rows in the order the matrix shows them."""
