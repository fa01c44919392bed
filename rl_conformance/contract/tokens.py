"""Token authority: the ids the engine used and returned.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import COMPAT, RETURNS, TOKENS, Level, row

TOKEN_INPUT = row(
    "tokens.token_input",
    "Token input through OpenAI-compatible routes",
    COMPAT,
    "Token input through OpenAI-compatible routes: Supported on vLLM, SGLang, TensorRT-LLM",
)

PROMPT_IDS_ECHO = row(
    "tokens.prompt_ids_echo",
    "nvext.prompt_token_ids echoes the effective prompt",
    RETURNS,
    "Named `nvext.prompt_token_ids` returns the effective single-prompt token sequence used "
    "after preprocessing, including token arrays or `nvext.token_data` supplied through the "
    "request.",
    asserts="nvext.prompt_token_ids equals the token sequence sent",
    flipped_by=("prompt_ids_missing", "prompt_ids_with_unsent_bos"),
)

COMPLETION_IDS = row(
    "tokens.completion_ids",
    "Completion token ids through named nvext fields",
    COMPAT,
    "Completion token IDs through named `nvext` fields: Supported (TensorRT-LLM through the "
    "shared response path)",
    flipped_by=(
        "completion_ids_missing",
        "completion_ids_retokenized",
        "engine_data_ids_differ",
        "invalid_json_body",
    ),
)

CHOICE_COUNT = row(
    "tokens.choice_count",
    "The expected number of choices",
    TOKENS,
    "Generated token IDs are present and contain the expected number of choices.",
    asserts="a response carries exactly the requested number of choices",
    flipped_by=("wrong_choice_count",),
)

USAGE_CONSISTENT = row(
    "tokens.usage_consistent",
    "Usage counts agree with the token ids",
    TOKENS,
    "The engine token sequence used for training is authoritative.",
    asserts="usage counts agree with the returned token ids",
    flipped_by=("usage_chunk_miscounts", "usage_counts_wrong"),
)

STREAM_CONCAT = row(
    "tokens.stream_concat",
    "Streamed ids concatenate to the unary ids",
    RETURNS,
    "Use the engine-returned sequence; exact placement depends on the selected interface.",
    asserts="streamed completion ids concatenate to the non-streamed ids at temperature 0",
    flipped_by=("stream_ids_differ", "stream_index_swapped"),
)

TEXT_TOKEN_EQUIVALENCE = row(
    "tokens.text_token_equivalence",
    "Text prompt and its token ids generate alike",
    TOKENS,
    "Do not reconstruct it by tokenizing generated text; chat templates, normalization, special "
    "tokens, and tokenizer versions can change the result.",
    asserts="a text prompt and its effective token ids give the same completion at temperature 0",
    flipped_by=("text_prompt_differs",),
)

MODEL_IDENTITY = row(
    "tokens.model_identity",
    "Model identity agrees across responses, models and discovery",
    TOKENS,
    "The tokenizer and model identity match the selected rollout worker.",
    asserts="the response names the model served by /v1/models and by the rollout workers",
    flipped_by=("model_identity_mismatch",),
)

INPUT_TOKENS_ESTIMATE = row(
    "tokens.input_tokens_estimate",
    "/v1/responses/input_tokens gives an estimate",
    TOKENS,
    "POST /v1/responses/input_tokens estimates input size for preflight decisions. It does not "
    "return authoritative token IDs.",
    level=Level.SHOULD,
    asserts="/v1/responses/input_tokens returns a non-negative integer estimate",
    flipped_by=("input_tokens_negative",),
)

ROWS = (
    TOKEN_INPUT,
    PROMPT_IDS_ECHO,
    COMPLETION_IDS,
    CHOICE_COUNT,
    USAGE_CONSISTENT,
    STREAM_CONCAT,
    TEXT_TOKEN_EQUIVALENCE,
    MODEL_IDENTITY,
    INPUT_TOKENS_ESTIMATE,
)
"""The rows in the order the matrix shows them."""
