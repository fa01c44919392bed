"""verl's generation through the Dynamo frontend, certified through a thin shim.

`dynamo/dynamo_async_server.py` (verl-project/verl-recipe, cited and pinned in
`fixtures/framework_clients/sources.json`) is read from the file `RL_CONFORMANCE_VERL_DYNAMO`
names. `DynamoHttpServer` is a Ray actor that also launches etcd, NATS, the workers and the
frontend; its rollout path does not need any of that, so the shim takes from the file unchanged
(by name, from its syntax tree) `DynamoHttpServer.generate` and every method it reaches: the
completion payload (`_build_frontend_completion_payload`: token-id prompt, `stream` false,
`nvext.extra_fields` `engine_data` by default, `logprobs` 0 when asked for), the POST over one
pooled aiohttp session with `X-Request-Id` (`_frontend_post`), the one retry without
`request_id`/`return_tokens_as_token_ids` on a 400 "Unsupported parameter", and the parsing
(`_completion_response_to_token_output`: token ids from the first of a dozen fields that holds
any, else the completion text encoded again; log probabilities from
`nvext.engine_data.completion_logprobs`, else `logprobs.token_logprobs`, padded with 0.0 or cut
to the ids' length; `stop` and `length` both reported as `completed`). They run bound to a
stand-in holding the configuration they read (`config.engine_kwargs["dynamo"]`, the served
model, the frontend address) and verl's two helpers they import, `normalize_token_ids` and
`TokenOutput`, stood in with the same behaviour on what reaches them.

verl refreshes Dynamo workers through its own ZeroMQ control sidecars and NCCL, not through the
RL routes, so the shim implements generation only. The tokenizer verl loads is the served
model's: here the fake fleet's toy tokenizer, which the text fallback uses. verl's agent loop
asks for log probabilities; the sample is the `TokenOutput` as verl hands it on (its
`stop_reason` as the finish reason, `completed` included), under the `X-Request-Id` it sent.
Every turn of a multi-turn trajectory is sent under the id verl's agent loop passes
(`AgentData.request_id`, drawn once per trajectory). verl's abort for Dynamo is a no-op
(`abort_all_requests` returns nothing aborted), so a cancelled slot is not treated otherwise;
an exception out of `generate` is a slot with no sample.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import os
import sys
import time
import types
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import urlsplit

from fake_backends.model import tokenizer as toy_tokenizer
from rl_conformance.certify import AdapterContext, RolloutRequest, Sample

from .upstream import Once, class_methods, source_text

CLIENT = "verl-dynamo-generation"
VARIABLE = "RL_CONFORMANCE_VERL_DYNAMO"
METHODS = (
    "_dynamo_cfg",
    "_dynamo_cfg_bool",
    "_enable_rl_mode",
    "_request_engine_data",
    "_request_completion_token_ids",
    "generate",
    "_frontend_completions_url",
    "_get_http_session",
    "_frontend_post",
    "_frontend_request_timeout_s",
    "_drop_frontend_extension_fields",
    "_build_frontend_completion_payload",
    "_use_direct_generate",
    "_payload_debug_summary",
    "_completion_response_to_token_output",
    "_log_engine_data_token_ids_status",
    "_build_token_output",
    "_fallback_token_ids",
    "_merge_nvext_extra_fields",
    "_extract_completion_token_ids",
    "_parse_token_id_strings",
    "_encode_logprob_token_strings",
    "_extract_completion_log_probs",
    "_normalize_log_probs",
)


def normalize_token_ids(value: Any) -> list[int]:
    """verl.utils.tokenizer.normalize_token_ids on what reaches it here: a mapping or object
    with `input_ids` is unwrapped, a tuple or one nested list flattened, anything not a list of
    int-convertible items raises TypeError (the parser moves on to its next field)."""
    if isinstance(value, dict) and "input_ids" in value:
        value = value["input_ids"]
    elif hasattr(value, "input_ids"):
        value = value.input_ids
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list | tuple):
        value = list(value[0])
    if not isinstance(value, list):
        raise TypeError(f"token_ids must be list-like token ids, got {type(value).__name__}")
    try:
        return [int(item) for item in value]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"token_id must be int-convertible: {exc}") from exc


@dataclass
class TokenOutput:
    """verl.workers.rollout.replica.TokenOutput: the fields `_build_token_output` fills."""

    token_ids: list[int]
    log_probs: list[float] | None = None
    stop_reason: str | None = None
    extra_fields: dict[str, Any] = field(default_factory=dict)


class ToyTokenizer:
    """The served model's tokenizer, as verl loads it from the checkpoint."""

    eos_token_id = toy_tokenizer.EOS_ID
    pad_token_id = toy_tokenizer.PAD_ID

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return toy_tokenizer.encode(text)


def _stand_ins() -> dict[str, types.ModuleType]:
    modules = {
        name: types.ModuleType(name)
        for name in (
            "verl",
            "verl.utils",
            "verl.utils.tokenizer",
            "verl.workers",
            "verl.workers.rollout",
            "verl.workers.rollout.replica",
        )
    }
    modules["verl.utils.tokenizer"].normalize_token_ids = normalize_token_ids  # type: ignore[attr-defined]
    modules["verl.workers.rollout.replica"].TokenOutput = TokenOutput  # type: ignore[attr-defined]
    return modules


def _load() -> dict[str, Any]:
    text, path = source_text(CLIENT, VARIABLE)
    for name, module in _stand_ins().items():
        sys.modules.setdefault(name, module)
    tree = ast.parse(text, path)
    module = ast.Module(
        body=[class_methods(CLIENT, tree, "DynamoHttpServer", METHODS)], type_ignores=[]
    )
    namespace: dict[str, Any] = {
        "__name__": "dynamo.dynamo_async_server",
        "asyncio": asyncio,
        "json": json,
        "logging": logging,
        "os": os,
        "time": time,
        "Any": Any,
        "Optional": Optional,
        "logger": logging.getLogger("verl.dynamo_async_server"),
        "is_valid_ipv6_address": lambda address: ":" in address,
    }
    exec(compile(ast.fix_missing_locations(module), path, "exec"), namespace)
    return namespace


load = Once(_load)
"""The namespace holding `DynamoHttpServer` reduced to the methods a rollout reaches."""


class VerlDynamoGeneration:
    implements = frozenset({"generation"})

    def __init__(self, context: AdapterContext) -> None:
        self.context = context
        server = load()["DynamoHttpServer"]()
        frontend = urlsplit(context.frontend_url)
        server.config = types.SimpleNamespace(
            engine_kwargs={"dynamo": {"request_timeout_s": context.request_timeout_s}}
        )
        server.model_config = types.SimpleNamespace(
            tokenizer=ToyTokenizer(), local_path=context.model
        )
        server._served_model_name = context.model
        server._server_address = frontend.hostname
        server._server_port = frontend.port
        server.global_steps = None
        server._http_session = None
        server._http_session_lock = asyncio.Lock()
        server._logged_engine_data_token_ids = False
        server._logged_missing_engine_data = False
        self.server = server
        self.trajectories: dict[str, str] = {}

    def request_id(self, request: RolloutRequest) -> str:
        """The id verl's agent loop hands `generate`: a uuid drawn once per trajectory and kept
        for all its turns (a sticky session that routes the trajectory to one server)."""
        if request.trajectory is None:
            return uuid.uuid4().hex
        return self.trajectories.setdefault(request.trajectory, uuid.uuid4().hex)

    async def generate(self, request: RolloutRequest) -> Sample | None:
        request_id = self.request_id(request)
        sampling_params = {
            "temperature": 1.0,
            "top_p": 1.0,
            "logprobs": True,
            "max_tokens": request.max_tokens,
        }
        try:
            output = await self.server.generate(
                list(request.prompt_ids), sampling_params, request_id
            )
        except Exception as exc:  # verl's generate logs and raises; the rollout is lost
            print(f"verl: rollout {request.slot} failed: {exc!r}", file=sys.stderr)
            return None
        sample = Sample(
            prompt_ids=request.prompt_ids,
            token_ids=tuple(output.token_ids),
            logprobs=tuple(output.log_probs or ()),
            finish_reason=str(output.stop_reason),
            attempt_id=request_id,
            model=self.context.model,
        )
        self.context.sink.admit(sample)
        return sample

    async def close(self) -> None:
        session = self.server._http_session
        if session is not None and not session.closed:
            await session.close()
