"""What the real frontend accepts in an OpenAI request body before any engine sees it.

Measured on Dynamo 1.6.1 and the 1.7 dev build (CONTRACT-NOTES §O6.20;
`fixtures/dynamo-1.6.1/*/refuse_*.json`), in the order the frontend applies them:

1. deserialising: a body field of the wrong JSON type, a missing `model` (or `prompt` /
   `messages`), a null `model` is a 400 "Failed to deserialize the JSON body into the target
   type: ..." (`shape_error`);
2. validating: chat's deprecated `functions` / `function_call` are a **501**; a top-level field
   the request type does not know is a 400 "Validation: Unsupported parameter(s): `a`, `b`" (the
   engines' own fields too: vLLM's `use_beam_search`, `request_id`, ..., SGLang's `rid`, ...);
   then each value's range ("Validation: Top_p must be between 0 and 1, got 2", ...);
3. only then the model: an unknown one is a 404 (`requests.ensure_served_model`);
4. then what the engine refuses (`engine_refusal`, real vLLM 0.31.0 and SGLang 0.5.21: 400
   "Bad Request").
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Mapping
from typing import Any

from fake_backends.frontend.error_bodies import FrontendError, shape_error, validation_error

SHARED_FIELDS = frozenset(
    {
        "model",
        "max_tokens",
        "temperature",
        "top_p",
        "n",
        "stream",
        "stream_options",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "user",
        "seed",
        "metadata",
        # Dynamo's CommonExt
        "ignore_eos",
        "min_tokens",
        "top_k",
        "min_p",
        "repetition_penalty",
        "include_stop_str_in_output",
        "guided_json",
        "guided_regex",
        "guided_grammar",
        "guided_choice",
        "guided_decoding_backend",
        "guided_whitespace_pattern",
        "skip_special_tokens",
        "prompt_logprobs",
        "return_tokens_as_token_ids",
        "nvext",
        # passed through to the engine, their types checked
        "cache_salt",
        "detokenize",
        "stop_token_ids",
        "allowed_token_ids",
        "bad_words_token_ids",
        "logprob_token_ids",
    }
)
FIELDS: Mapping[str, frozenset[str]] = {
    "completions": SHARED_FIELDS
    | {"prompt", "suffix", "logprobs", "echo", "best_of", "no_stop_trim", "prompt_embeds"}
    | {"add_generation_prompt", "continue_final_message"},
    "chat": SHARED_FIELDS
    | {
        "messages",
        "logprobs",
        "top_logprobs",
        "max_completion_tokens",
        "store",
        "reasoning_effort",
        "modalities",
        "prediction",
        "audio",
        "response_format",
        "service_tier",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "function_call",
        "functions",
        "web_search_options",
        "prompt_cache_key",
        "chat_template_args",
        "chat_template_kwargs",
        "media_io_kwargs",
        "mm_processor_kwargs",
        "thinking",
        "thinking_token_budget",
        "add_generation_prompt",
        "continue_final_message",
    },
}
"""The top-level fields each route's request type knows in Dynamo 1.6 (every other one is
unsupported)."""
FIELDS_SINCE_1_7 = frozenset({"vllm_xargs"})
"""Accepted by the 1.7 frontend (1.7.0.dev20261026, measured), refused by 1.6.1."""
MAX_COMPLETION_LOGPROBS = {True: 5, False: 20}
"""Completions `logprobs` the frontend takes, by "plays 1.6": 1.6.1 refuses 6, 1.7 takes 20."""

_BOOL = ("a boolean", lambda v: isinstance(v, bool))
_STRING = ("a string", lambda v: isinstance(v, str))
_FLOAT = ("f32", lambda v: _is_number(v) and math.isfinite(v))
_INTEGERS = {"u8": (0, 255), "u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1)}
_INTEGERS["i64"] = (-(2**63), 2**63 - 1)
Kind = tuple[str, Callable[[Any], bool]]


def _integer(kind: str) -> Kind:
    low, high = _INTEGERS[kind]
    return kind, lambda v: _is_int(v) and low <= v <= high


TYPES: Mapping[str, Mapping[str, Kind]] = {
    endpoint: {
        "model": _STRING,
        "user": _STRING,
        "stream": _BOOL,
        "ignore_eos": _BOOL,
        "include_stop_str_in_output": _BOOL,
        "skip_special_tokens": _BOOL,
        "return_tokens_as_token_ids": _BOOL,
        "temperature": _FLOAT,
        "top_p": _FLOAT,
        "presence_penalty": _FLOAT,
        "frequency_penalty": _FLOAT,
        "min_p": _FLOAT,
        "repetition_penalty": _FLOAT,
        "n": _integer("u8"),
        "max_tokens": _integer("u32"),
        "min_tokens": _integer("u32"),
        "seed": _integer("i64"),
        "top_k": _integer("i32"),
        "logit_bias": ("a map", lambda v: isinstance(v, Mapping)),
        **(
            {"echo": _BOOL, "no_stop_trim": _BOOL, "logprobs": _integer("u8")}
            | {"best_of": _integer("u8")}
            if endpoint == "completions"
            else {"logprobs": _BOOL, "top_logprobs": _integer("u8"), "store": _BOOL}
            | {"max_completion_tokens": _integer("u32"), "parallel_tool_calls": _BOOL}
        ),
    }
    for endpoint in FIELDS
}
"""The JSON types serde takes for the fields whose type the suite's requests can get wrong."""

ENUMS = {
    "reasoning_effort": ("none", "minimal", "low", "medium", "high", "xhigh", "max"),
    "service_tier": ("auto", "default", "flex", "scale", "priority", "fast"),
}
"""Chat fields serde reads as enums (their variants as 1.6.1 lists them when refusing one)."""
ROLES = ("developer", "system", "user", "assistant", "tool", "function")
DEPRECATED = {
    "functions": "`functions` is deprecated. Please migrate to use `tools` instead.",
    "function_call": "`function_call` is deprecated. Please migrate to use `tool_choice` instead.",
}
CHAT_ONLY = ("add_generation_prompt", "continue_final_message")
TOKEN_ID_LISTS = ("stop_token_ids", "allowed_token_ids", "logprob_token_ids")
ENGINE_MAX_LOGPROBS = 20
"""vLLM's default `--max-logprobs`: more prompt logprobs are refused by the engine."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _described(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, str):
        return f'string "{value}"'
    if _is_int(value):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    return "a sequence" if isinstance(value, list) else "a map"


def deserialize(body: Mapping[str, Any], endpoint: str) -> None:
    """The 400s of a body that does not fit the route's request type."""
    for name, (expected, fits) in TYPES[endpoint].items():
        value = body.get(name)
        if value is not None and not fits(value):
            raise shape_error(f"invalid type: {_described(value)}, expected {expected}")
    for name, variants in ENUMS.items():
        value = body.get(name)
        if endpoint == "chat" and value is not None and value not in variants:
            raise shape_error(f"unknown variant `{value}`, expected one of {_listed(variants)}")
    if endpoint == "chat" and isinstance(body.get("messages"), list):
        for message in body["messages"]:
            _deserialize_message(message)
    required = ("messages", "model") if endpoint == "chat" else ("model", "prompt")
    for name in required:
        if name not in body:
            raise shape_error(f"missing field `{name}`")
    if body["model"] is None:
        raise shape_error("invalid type: null, expected a string")


def _listed(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def _deserialize_message(message: Any) -> None:
    """A chat message is a tagged enum on `role`; all but the assistant's need `content`."""
    if not isinstance(message, Mapping):
        return  # refused later, as a sequence of something else
    role = message.get("role")
    if role is None:
        raise shape_error("missing field `role`")
    if role not in ROLES:
        raise shape_error(f"unknown variant `{role}`, expected one of {_listed(ROLES)}")
    if role != "assistant" and "content" not in message:
        raise shape_error("missing field `content`")
    if role != "assistant" and message["content"] is None:
        raise shape_error(
            "data did not match any variant of untagged enum ChatCompletionRequestMessageContent"
        )


def validate(body: Mapping[str, Any], endpoint: str, *, plays_1_6: bool = False) -> None:
    """The frontend's own refusals of a well-typed body, before it looks the model up, as
    Dynamo 1.6 makes them (`plays_1_6`) or 1.7."""
    for name, message in DEPRECATED.items():
        if endpoint == "chat" and name in body:
            raise FrontendError(501, f"Validation: {message}")
    known = FIELDS[endpoint] if plays_1_6 else FIELDS[endpoint] | FIELDS_SINCE_1_7
    unknown = [name for name in body if name not in known]
    if unknown:
        listed = ", ".join(f"`{name}`" for name in unknown)
        raise validation_error(f"Unsupported parameter(s): {listed}")
    if endpoint == "completions" and any(name in body for name in CHAT_ONLY):
        raise validation_error(
            "`add_generation_prompt` and `continue_final_message` are only supported on "
            "/v1/chat/completions"
        )
    if body["model"] == "":
        raise validation_error("Model cannot be empty")
    _sampling_ranges(body, endpoint, MAX_COMPLETION_LOGPROBS[plays_1_6])
    for check in (_stops_and_user, _engine_inputs, _chat_options):
        check(body, endpoint)
    if body.get("stream_options") is not None and body.get("stream") is not True:
        raise validation_error(
            "The 'stream_options' field is only allowed when 'stream' is set to true."
        )


def _in_range(body: Mapping[str, Any], name: str, low: float, high: float, label: str) -> None:
    value = body.get(name)
    if _is_number(value) and not low <= value <= high:
        raise validation_error(f"{label} must be between {low:g} and {high:g}, got {value:g}")


def _sampling_ranges(body: Mapping[str, Any], endpoint: str, max_logprobs: int) -> None:
    top_p = body.get("top_p")
    if _is_number(top_p) and not 0 < top_p <= 1:
        raise validation_error(f"Top_p must be between 0 and 1, got {top_p:g}")
    _in_range(body, "presence_penalty", -2, 2, "Presence penalty")
    _in_range(body, "frequency_penalty", -2, 2, "Frequency penalty")
    _in_range(body, "min_p", 0, 1, "Min_p")
    penalty = body.get("repetition_penalty")
    if _is_number(penalty) and not 0 < penalty <= 2:
        raise validation_error(f"Repetition penalty must be between 0 and 2, got {penalty:g}")
    top_k = body.get("top_k")
    if _is_int(top_k) and top_k < -1:
        raise validation_error("Top_k must be null or greater than or equal to -1")
    if endpoint == "completions":
        _in_range(body, "logprobs", 0, max_logprobs, "Logprobs")
        _in_range(body, "best_of", 0, 20, "Best_of")
        best_of, n = body.get("best_of"), body.get("n")
        if _is_int(best_of) and _is_int(n) and best_of < n:
            raise validation_error(
                f"Best_of must be greater than or equal to n, got best_of={best_of} and n={n}"
            )
    else:
        _in_range(body, "top_logprobs", 0, 20, "Top_logprobs")
        if body.get("max_completion_tokens") == 0:
            raise validation_error("Max completion tokens must be greater than 0, got 0")
    for token, bias in (body.get("logit_bias") or {}).items():
        if not (token.isdigit() and int(token) < 2**32):
            raise validation_error("Logit bias key must be a non-negative 32-bit integer token id")
        if _is_number(bias) and not -100 <= bias <= 100:
            raise validation_error(
                f"Logit bias for token '{token}' must be between -100 and 100, got {bias:g}"
            )


def _stops_and_user(body: Mapping[str, Any], endpoint: str) -> None:
    stop = body.get("stop")
    if isinstance(stop, list) and not stop:
        raise validation_error("Stop sequences array cannot be empty")
    for index, sequence in enumerate(stop if isinstance(stop, list) else []):
        if sequence == "":
            raise validation_error(f"Stop sequence at index {index} cannot be empty")
    user = body.get("user")
    if isinstance(user, str) and not user.strip():
        raise validation_error("User ID cannot be empty")
    prompt = body.get("prompt")
    if endpoint == "completions" and prompt == "":
        raise validation_error("Prompt string cannot be empty")
    if endpoint == "completions" and prompt == []:
        raise validation_error("Prompt string array cannot be empty")
    for index, inner in enumerate(prompt if isinstance(prompt, list) else []):
        if inner == []:
            raise validation_error(f"Prompt integer array at index {index} cannot be empty")


def _engine_inputs(body: Mapping[str, Any], endpoint: str) -> None:
    """The fields the frontend passes through to the engine, their types checked."""
    salt = body.get("cache_salt")
    if salt is not None and not isinstance(salt, str):
        raise validation_error("`cache_salt` must be a string")
    detokenize = body.get("detokenize")
    if detokenize is not None and not isinstance(detokenize, bool):
        raise validation_error("`detokenize` must be a boolean")
    for name in TOKEN_ID_LISTS:
        ids = body.get(name)
        if ids is not None and not (isinstance(ids, list) and all(_is_int(t) for t in ids)):
            raise validation_error(f"`{name}` must be an array of token IDs")
    banned = body.get("bad_words_token_ids")
    if banned is not None and not (
        isinstance(banned, list)
        and all(isinstance(w, list) and all(_is_int(t) for t in w) for w in banned)
    ):
        raise validation_error("`bad_words_token_ids` must be an array of token ID arrays")
    embeds = body.get("prompt_embeds")
    if endpoint == "completions" and embeds is not None:
        try:
            base64.b64decode(str(embeds), validate=True)
        except (binascii.Error, ValueError):
            raise validation_error("prompt_embeds must be valid base64-encoded data") from None


def _chat_options(body: Mapping[str, Any], endpoint: str) -> None:
    if endpoint != "chat":
        return
    if body.get("messages") == []:
        raise validation_error(
            "The 'messages' field cannot be empty. At least one message is required."
        )
    tools = body.get("tools")
    if tools == []:
        raise validation_error(
            "tools array cannot be empty; omit the field entirely to disable tool use"
        )
    if body.get("tool_choice") == "required" and not tools:
        raise validation_error('tool_choice is "required" but tools is empty')
    if body.get("add_generation_prompt") is True and body.get("continue_final_message") is True:
        raise validation_error(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
        )
    arguments = body.get("chat_template_args") or body.get("chat_template_kwargs")
    if isinstance(arguments, Mapping) and "chat_template" in arguments:
        raise validation_error("`chat_template` is not supported inside `chat_template_args`")


def engine_refusal(body: Mapping[str, Any], endpoint: str, engine: str) -> FrontendError | None:
    """What the engine behind the frontend refuses (answered 400 "Bad Request"), measured:
    real vLLM 0.31.0 and SGLang 0.5.21 refuse fewer `max_tokens` than `min_tokens` and a thinking
    budget on a model without a reasoning parser; vLLM also more prompt logprobs than it computes
    (SGLang answers them). Nothing for TensorRT-LLM, which was not measured."""
    if engine not in ("vllm", "sglang"):
        return None
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    min_tokens = body.get("min_tokens")
    too_few = _is_int(min_tokens) and _is_int(max_tokens) and min_tokens > max_tokens
    prompt_logprobs = body.get("prompt_logprobs")
    too_many = engine == "vllm" and _is_int(prompt_logprobs)
    too_many = too_many and prompt_logprobs > ENGINE_MAX_LOGPROBS
    thinking = endpoint == "chat" and body.get("thinking_token_budget") is not None
    return FrontendError(400, "Bad Request") if too_few or too_many or thinking else None
