"""The request bodies the frontend differential sends, generated from field tables.

Each case is one change to a small valid request of one endpoint: a known field with a valid
value, a field only vLLM's or SGLang's own servers know, an unknown field, a missing required
field, a value of the wrong type, or one outside its range. The field tables are the OpenAI
request types the Dynamo frontend deserialises, its `CommonExt` and `nvext`, and the engines'
native fields of the fact sheets (vLLM `CompletionRequest`/`ChatCompletionRequest`, SGLang's
OpenAI extras and `/generate` keys). `$MODEL` stands for the served model. A case's name is
`<endpoint>: <change>`, the key `fixtures/KNOWN_DIFFERENCES.md` lists differences by.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MODEL = "$MODEL"
PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
PROMPT = [316, 276, 300, 400]
MESSAGES = [{"role": "user", "content": "hello"}]
BASE: dict[str, dict[str, Any]] = {
    "completions": {"model": MODEL, "prompt": PROMPT, "max_tokens": 3, "temperature": 0},
    "chat": {"model": MODEL, "messages": MESSAGES, "max_tokens": 3, "temperature": 0},
}
REQUIRED = {"completions": ("model", "prompt"), "chat": ("model", "messages")}


@dataclass(frozen=True)
class Case:
    endpoint: str
    change: str
    body: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{self.endpoint}: {self.change}"

    @property
    def path(self) -> str:
        return PATHS[self.endpoint]

    def sent(self, model: str) -> dict[str, Any]:
        return {k: model if v == MODEL else v for k, v in self.body.items()}


# Fields both endpoints share, with a valid value (OpenAI, Dynamo's CommonExt and nvext).
SHARED_FIELDS: dict[str, Any] = {
    "temperature": 0.5,
    "top_p": 0.9,
    "n": 1,
    "stream": False,
    "stop": ["zzzz"],
    "presence_penalty": 0.1,
    "frequency_penalty": 0.1,
    "logit_bias": {"5": 1},
    "user": "someone",
    "seed": 3,
    "metadata": {"a": "b"},
    "ignore_eos": False,
    "min_tokens": 1,
    "top_k": 5,
    "min_p": 0.1,
    "repetition_penalty": 1.1,
    "include_stop_str_in_output": False,
    "skip_special_tokens": True,
    "prompt_logprobs": 1,
    "return_tokens_as_token_ids": True,
    "nvext": {"extra_fields": ["completion_token_ids"]},
    "guided_decoding_backend": None,
}
ENDPOINT_FIELDS: dict[str, dict[str, Any]] = {
    "completions": {
        "logprobs": 1,
        "echo": False,
        "best_of": 1,
        "suffix": None,
        "no_stop_trim": False,
    },
    "chat": {
        "logprobs": True,
        "top_logprobs": 1,
        "max_completion_tokens": 3,
        "store": False,
        "parallel_tool_calls": False,
        "tool_choice": "none",
        "response_format": {"type": "text"},
        "reasoning_effort": "low",
        "service_tier": "auto",
        "chat_template_args": {},
        "chat_template_kwargs": {},
        "thinking_token_budget": 5,
        "add_generation_prompt": True,
        "continue_final_message": False,
    },
}
VLLM_FIELDS: dict[str, Any] = {
    "use_beam_search": False,
    "length_penalty": 1.0,
    "stop_token_ids": [5],
    "spaces_between_special_tokens": True,
    "truncate_prompt_tokens": 10,
    "allowed_token_ids": [5, 6],
    "add_special_tokens": True,
    "priority": 0,
    "request_id": "r1",
    "cache_salt": "salt",
    "kv_transfer_params": {},
    "vllm_xargs": {},
    "bad_words": [],
    "structured_outputs": {},
    "return_token_ids": True,
    "logprob_token_ids": [5],
    "return_weight_versions": False,
    "return_prompt_text": False,
    "chat_template": "x",
    "documents": [],
}
SGLANG_FIELDS: dict[str, Any] = {
    "regex": None,
    "ebnf": None,
    "json_schema": None,
    "lora_path": None,
    "rid": "r",
    "separate_reasoning": True,
    "stream_reasoning": True,
    "return_hidden_states": False,
    "custom_params": None,
    "sampling_seed": 1,
    "max_new_tokens": 3,
    "input_ids": [5],
    "sampling_params": {},
    "return_logprob": False,
    "top_logprobs_num": 1,
}
UNKNOWN_FIELDS: dict[str, Any] = {"bogus": 1, "bogus_null": None, "Model": "x"}
WRONG_TYPES: dict[str, dict[str, Any]] = {
    "completions": {
        "model": 5,
        "prompt": {"a": 1},
        "max_tokens": "3",
        "temperature": "hot",
        "stream": "yes",
        "logprobs": True,
        "n": 1.5,
        "stop": 5,
        "nvext": [],
        "echo": 1,
        "return_tokens_as_token_ids": "yes",
    },
    "chat": {
        "model": None,
        "messages": "hello",
        "max_tokens": -1,
        "logprobs": 1,
        "top_logprobs": "2",
        "stream_options": 1,
        "seed": "x",
        "ignore_eos": "no",
    },
}
OUT_OF_RANGE: dict[str, Any] = {
    "temperature": [-0.1, 2.1],
    "top_p": [0, 1.1],
    "n": [0, 129],
    "presence_penalty": [2.1, -2.1],
    "frequency_penalty": [2.5],
    "logit_bias": [{"5": 101}, {"x": 1}],
    "stop": [["zq1", "zq2", "zq3", "zq4", "zq5"], [], [""]],
    "min_p": [1.5],
    "top_k": [-2, 0],
    "repetition_penalty": [0, -1],
    "min_tokens": [5],
    "prompt_logprobs": [21],
    "user": ["", " "],
    "cache_salt": [5],
    "stop_token_ids": ["5"],
    "bad_words_token_ids": [[[5]], [5]],
    "detokenize": [True, "yes"],
    "seed": [-1, 2**63],
    "max_tokens": [0, 2**32, 100000],
    "model": [""],
}
ENDPOINT_OUT_OF_RANGE: dict[str, dict[str, Any]] = {
    "completions": {
        "logprobs": [0, 5, 6, 20, 21],
        "best_of": [0, 2, 21],
        "prompt": ["", [], [-1], [[]], [99999]],
        "prompt_embeds": ["!!"],
    },
    "chat": {
        "top_logprobs": [20, 21],
        "messages": [[], [{"role": "robot", "content": "hi"}], [{"role": "user"}]],
        "max_completion_tokens": [0],
        "reasoning_effort": ["extreme"],
    },
}
AS_IDS = {"return_tokens_as_token_ids": True}
CONTINUE = {"continue_final_message": True}
TOGETHER: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "completions": [
        ("n=2 temperature=0", {"n": 2}),
        ("n=2 temperature=0.7", {"n": 2, "temperature": 0.7}),
        ("n=2 best_of=1", {"n": 2, "temperature": 0.7, "best_of": 1}),
        ("stream_options without stream", {"stream_options": {"include_usage": True}}),
        ("stream with usage", {"stream": True, "stream_options": {"include_usage": True}}),
        ("stream logprobs 2", {"stream": True, "logprobs": 2}),
        ("stream with an unknown field", {"stream": True, "bogus": 1}),
        ("echo with logprobs", {"echo": True, "logprobs": 1}),
        ("unknown model", {"model": "no-such-model"}),
        ("unknown model and an unknown field", {"model": "no-such-model", "bogus": 1}),
        ("unknown model and max_tokens=0", {"model": "no-such-model", "max_tokens": 0}),
        ("an unknown field and max_tokens=0", {"bogus": 1, "max_tokens": 0}),
        ("missing model and an unknown field", {"model": None, "bogus": 1}),
        ("unknown nvext key", {"nvext": {"bogus": 1}}),
        ("token data in nvext", {"nvext": {"token_data": [316, 276]}}),
        ("token data in nvext and no prompt", {"prompt": None, "nvext": {"token_data": [316]}}),
        ("token data in nvext and an empty prompt", {"prompt": "", "nvext": {"token_data": [3]}}),
        ("empty nvext list", {"nvext": []}),
        ("chat-only prompt options", {"add_generation_prompt": False}),
        ("batched prompts", {"prompt": [[316, 276], [300]]}),
        ("logprobs 2 with token ids", {"logprobs": 2, "return_tokens_as_token_ids": True}),
        ("vLLM's own logprob spelling in a stream", {"stream": True, "logprobs": 1, **AS_IDS}),
    ],
    "chat": [
        ("n=2 temperature=0.7", {"n": 2, "temperature": 0.7}),
        ("top_logprobs without logprobs", {"top_logprobs": 2}),
        ("stream logprobs top 2", {"stream": True, "logprobs": True, "top_logprobs": 2}),
        ("stream without a model", {"stream": True, "model": None}),
        ("empty tools", {"tools": []}),
        ("deprecated functions", {"functions": []}),
        ("unknown model", {"model": "no-such-model"}),
        ("unknown role", {"messages": [{"role": "robot", "content": "hi"}]}),
        ("token data in nvext", {"nvext": {"token_data": [316, 276]}}),
        ("deprecated function_call", {"function_call": "none"}),
        ("required tool choice without tools", {"tool_choice": "required"}),
        ("generation prompt and continuation", {"add_generation_prompt": True, **CONTINUE}),
        ("template inside template arguments", {"chat_template_args": {"chat_template": "x"}}),
        ("logprobs with token ids", {"logprobs": True, "top_logprobs": 2, **AS_IDS}),
        ("stream with token ids", {"stream": True, "logprobs": True, **AS_IDS}),
        ("stream with an unknown field", {"stream": True, "use_beam_search": False}),
    ],
}


LOGPROBS = ("logprobs", "top_logprobs", "prompt_logprobs", "echo")
CONTEXT_WINDOW = 2048
"""The launched real engine's `--max-model-len`; the mocker publishes no token budget."""


def engine_decided(case: Case) -> str | None:
    """Why the engine behind the frontend, not the frontend, shapes this case's answer (None:
    the frontend alone does). Such a case is not asked of Dynamo's mocker, which returns no
    log probabilities, publishes no token budget and refuses nothing vLLM refuses."""
    body = case.body
    if any(body.get(name) is not None and body[name] is not False for name in LOGPROBS):
        return "log probabilities are the engine's (the mocker returns none)"
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(limit, int) and limit > CONTEXT_WINDOW:
        return "the context window is the engine's token budget (the mocker publishes none)"
    if isinstance(body.get("min_tokens"), int) and body["min_tokens"] > (limit or 0):
        return "vLLM refuses min_tokens above max_tokens (the mocker does not)"
    if "thinking_token_budget" in body or "allowed_token_ids" in body:
        return "the engine decides (vLLM refuses a thinking budget, restricts sampling)"
    return None


def _changed(endpoint: str, change: str, **fields: Any) -> Case:
    return Case(endpoint, change, {**BASE[endpoint], **fields})


def _without(endpoint: str, change: str, *names: str) -> Case:
    body = {k: v for k, v in BASE[endpoint].items() if k not in names}
    return Case(endpoint, change, body)


def generate_cases() -> Iterator[Case]:
    """Every case, in a fixed order (the plain request of each endpoint first)."""
    for endpoint in BASE:
        yield Case(endpoint, "plain", dict(BASE[endpoint]))
        for kind, table in (
            ("known", {**SHARED_FIELDS, **ENDPOINT_FIELDS[endpoint]}),
            ("vllm", VLLM_FIELDS),
            ("sglang", SGLANG_FIELDS),
            ("unknown", UNKNOWN_FIELDS),
        ):
            for name, value in table.items():
                yield _changed(endpoint, f"{kind} {name}={_short(value)}", **{name: value})
        for name in REQUIRED[endpoint]:
            yield _without(endpoint, f"missing {name}", name)
        yield _without(endpoint, "missing every required field", *REQUIRED[endpoint])
        for name, value in WRONG_TYPES[endpoint].items():
            yield _changed(endpoint, f"wrong type {name}={_short(value)}", **{name: value})
        for name, values in {**OUT_OF_RANGE, **ENDPOINT_OUT_OF_RANGE[endpoint]}.items():
            for value in values:
                yield _changed(endpoint, f"range {name}={_short(value)}", **{name: value})
        for change, fields in TOGETHER[endpoint]:
            body = {k: v for k, v in {**BASE[endpoint], **fields}.items() if v is not None}
            yield Case(endpoint, change, body)


def _short(value: Any) -> str:
    import json

    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 24 else text[:21] + "..."


CASES: tuple[Case, ...] = tuple(generate_cases())
