"""NeMo RL's generation through the Dynamo frontend, certified through a thin shim.

`nemo_rl/models/generation/dynamo/dynamo_generation.py` and `http_client.py` (NVIDIA-NeMo/RL,
cited and pinned in `fixtures/framework_clients/sources.json`) are read from the checkout
`RL_CONFORMANCE_NEMO_RL_SOURCE` names. `DynamoGeneration` itself needs Ray, torch and the rest
of NeMo RL; the functions a rollout goes through do not, so the shim takes them from the file
unchanged (by name, from its syntax tree): the retry constants, `_is_retryable_http_response`,
`_parse_dynamo_completion_response`, and the methods `_completion_url`, `_request_timeout_s`,
`_build_completion_request` and `_post_completion_request`, bound to a stand-in holding the
configuration they read. `http_client.py` is loaded whole (it needs `aiohttp`).

NeMo RL refreshes weights through Ray workers and NCCL, not through the RL routes, so the shim
implements generation only. A sample is what `_parse_dynamo_completion_response` returns: its
token ids and log probabilities, finished by `length` when it says truncated, else `stop`. NeMo
RL sends no attempt identity, so the sample names none.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import sys
import types
from typing import Any, Optional

from rl_conformance.certify import AdapterContext, RolloutRequest, Sample

from .upstream import Once, class_methods, definitions, source_text

CLIENT = "nemo-rl-dynamo-generation"
VARIABLE = "RL_CONFORMANCE_NEMO_RL_SOURCE"
PACKAGE = "nemo_rl/models/generation/dynamo"
FUNCTIONS = (
    "_HTTP_MAX_ATTEMPTS",
    "_HTTP_RETRY_DELAY_S",
    "_RETRYABLE_HTTP_STATUS_CODES",
    "_is_retryable_http_response",
    "_parse_dynamo_completion_response",
)
METHODS = (
    "_completion_url",
    "_request_timeout_s",
    "_build_completion_request",
    "_post_completion_request",
)


def _load() -> dict[str, Any]:
    http_text, http_path = source_text(CLIENT, VARIABLE, f"{PACKAGE}/http_client.py")
    http_client = types.ModuleType("nemo_rl.models.generation.dynamo.http_client")
    http_client.__file__ = http_path
    exec(compile(http_text, http_path, "exec"), http_client.__dict__)
    text, path = source_text(CLIENT, VARIABLE, f"{PACKAGE}/dynamo_generation.py")
    tree = ast.parse(text, path)
    body = [
        *definitions(CLIENT, tree, FUNCTIONS),
        class_methods(CLIENT, tree, "DynamoGeneration", METHODS),
    ]
    namespace: dict[str, Any] = {
        "__name__": "nemo_rl.models.generation.dynamo.dynamo_generation",
        "asyncio": asyncio,
        "logging": logging,
        "Any": Any,
        "Optional": Optional,
        "LOGGER": logging.getLogger("nemo_rl.dynamo"),
        "async_http_post_json": http_client.async_http_post_json,
        "format_dynamo_error": http_client.format_dynamo_error,
    }
    module = ast.Module(body=body, type_ignores=[])
    exec(compile(ast.fix_missing_locations(module), path, "exec"), namespace)
    return namespace


load = Once(_load)
"""The upstream functions and the class carrying the upstream methods."""


class NeMoRLDynamoGeneration:
    implements = frozenset({"generation"})

    def __init__(self, context: AdapterContext) -> None:
        self.context = context
        upstream = load()
        self.generation = upstream["DynamoGeneration"]()
        self.generation._dynamo_frontend_base_url = context.frontend_url.rstrip("/") + "/v1"
        self.generation._dynamo_cfg = types.SimpleNamespace(
            request_timeout_s=context.request_timeout_s
        )
        self.generation.cfg = {
            "model_name": context.model,
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": None,
            "stop_token_ids": None,
        }

    async def generate(self, request: RolloutRequest) -> Sample | None:
        try:
            ids, logprobs, truncated = await self.generation._post_completion_request(
                prompt_token_ids=list(request.prompt_ids),
                greedy=True,
                stop_strings=None,
                max_new_tokens=request.max_tokens,
            )
        except RuntimeError as exc:  # the parser fails closed on anything unverified
            print(f"nemo-rl: rollout {request.slot} not admitted: {exc}", file=sys.stderr)
            return None
        if request.cancel.is_cancelled():
            return None
        sample = Sample(
            prompt_ids=request.prompt_ids,
            token_ids=tuple(ids),
            logprobs=tuple(logprobs),
            finish_reason="length" if truncated else "stop",
            attempt_id="",
            model=self.context.model,
        )
        self.context.sink.admit(sample)
        return sample

    async def close(self) -> None:
        return None
