"""The capability registry: the rows of the compatibility matrix.

Each capability names what it certifies, its level, the spec section and sentence, and the support
the spec documents per backend (its Backend Compatibility table). Documented support decides how an
absent feature is reported: absent where documented `supported` is a failure; absent where the spec
documents anything weaker is `unsupported`. A feature that works where the spec says it does not is
reported as a contradiction of the documentation.

The rows are in two halves: the data plane's here (discovery, tokens, logprobs, native routes,
streams), the control plane's in `control_capabilities`; what a row is made of is in
`capability_kinds`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ..checks.base import Level
from .capability_kinds import (
    ADMIN,
    ALL,
    COMPAT,
    DISCOVERY,
    RETURNS,
    RL_WORKERS,
    STREAM,
    TOKENS,
    Backend,
    Capability,
    Support,
    cap,
)
from .control_capabilities import CONTROL_PLANE

__all__ = [
    "ADMIN",
    "ALL",
    "BY_ID",
    "CAPABILITIES",
    "RL_WORKERS",
    "Backend",
    "Capability",
    "Level",
    "Support",
    "get",
    "unknown_ids_message",
]


DATA_PLANE: tuple[Capability, ...] = (
    cap(
        "discovery.protocol_version",
        "Discovery answers protocol version 1",
        DISCOVERY,
        "Check protocol_version before reading the worker list.",
    ),
    cap(
        "discovery.schema",
        "Discovery body matches the protocol v1 schema",
        DISCOVERY,
        "Optional fields such as model, system_url, admin_base_url, and world_size appear only "
        "when the worker provides them.",
    ),
    cap(
        "discovery.listener_isolation",
        "Discovery is served on its own listener only",
        "Separate the Three Planes",
        "Discovery: RL listener, normally port 8001. The discovery endpoint is read-only.",
        level=Level.SHOULD,
    ),
    cap(
        "discovery.worker_registration",
        "RL workers register with /v1/rl/workers",
        COMPAT,
        "`/v1/rl/workers` registration: vLLM RL-enabled workers; SGLang and TensorRT-LLM not "
        "currently registered",
        RL_WORKERS,
    ),
    cap(
        "discovery.routes",
        "Advertised routes are strings, sorted and unique",
        DISCOVERY,
        "`routes`: Worker-advertised Dynamo administration routes",
        RL_WORKERS,
    ),
    cap(
        "discovery.endpoint_identity",
        "Worker identity: request_plane_url and 64-bit instance ids",
        DISCOVERY,
        "`namespace`, `component`, `endpoint`, `instance_id`, `transport`, "
        "`request_plane_url`: Stable Dynamo endpoint identity",
        RL_WORKERS,
    ),
    cap(
        "discovery.identity_not_position",
        "Workers are identified by identity, not list position",
        DISCOVERY,
        "Do not cache membership indefinitely or interpret list position as worker identity.",
        RL_WORKERS,
        level=Level.SHOULD,
    ),
    cap(
        "discovery.error_fails_closed",
        "A worker with a probe error fails closed",
        DISCOVERY,
        "`error`: Probe failure; fail closed when a required worker or route is unavailable",
        RL_WORKERS,
    ),
    cap(
        "discovery.probe_replies_validated",
        "A worker whose probe reply is refused or an error is listed with routes [] and its error",
        DISCOVERY,
        "`error`: Probe failure; fail closed when a required worker or route is unavailable. "
        "(Upstream ai-dynamo/dynamo lib/rl/src/lib.rs parse_worker_routes: a reply without a "
        "`routes` array, with a non-string or empty route, an invalid `world_size`, or "
        "`admin_base_url` without a valid `world_size` is a probe failure; a worker's own "
        '`{"status": "error", "message": M}` is listed as M; routes are sorted and '
        "de-duplicated.)",
        RL_WORKERS,
    ),
    cap(
        "discovery.probe_deadline",
        "A worker that never answers its probe is listed with its error within the deadline",
        DISCOVERY,
        "`DYN_RL_REQUEST_TIMEOUT_SECS` (default `30`): Bounds each worker descriptor probe. "
        "Discovery can also return a worker with an `error` and an empty route list when its "
        "descriptor probe times out or fails. (Upstream RL Implementation Guide, discovery "
        "listener variables; ai-dynamo/dynamo lib/rl/src/lib.rs describe_worker.)",
        RL_WORKERS,
    ),
    cap(
        "tokens.token_input",
        "Token input through OpenAI-compatible routes",
        COMPAT,
        "Token input through OpenAI-compatible routes: Supported on vLLM, SGLang, TensorRT-LLM",
    ),
    cap(
        "tokens.prompt_ids_echo",
        "nvext.prompt_token_ids echoes the effective prompt",
        RETURNS,
        "Named `nvext.prompt_token_ids` returns the effective single-prompt token sequence used "
        "after preprocessing, including token arrays or `nvext.token_data`.",
    ),
    cap(
        "tokens.completion_ids",
        "Completion token ids through named nvext fields",
        COMPAT,
        "Completion token IDs through named `nvext` fields: Supported (TensorRT-LLM through the "
        "shared response path)",
    ),
    cap(
        "tokens.choice_count",
        "The expected number of choices",
        TOKENS,
        "Generated token IDs are present and contain the expected number of choices.",
    ),
    cap(
        "tokens.usage_consistent",
        "Usage counts agree with the token ids",
        TOKENS,
        "The engine token sequence used for training is authoritative.",
    ),
    cap(
        "tokens.stream_concat",
        "Streamed ids concatenate to the unary ids",
        RETURNS,
        "Use the engine-returned sequence; exact placement depends on the selected interface.",
    ),
    cap(
        "tokens.text_token_equivalence",
        "Text prompt and its token ids generate alike",
        TOKENS,
        "Do not reconstruct it by tokenizing generated text.",
    ),
    cap(
        "tokens.model_identity",
        "Model identity agrees across responses, models and discovery",
        TOKENS,
        "The tokenizer and model identity match the selected rollout worker.",
    ),
    cap(
        "tokens.input_tokens_estimate",
        "/v1/responses/input_tokens gives an estimate",
        TOKENS,
        "POST /v1/responses/input_tokens estimates input size for preflight decisions.",
        level=Level.SHOULD,
    ),
    cap(
        "logprobs.selected_alignment",
        "Selected logprobs align with the generated ids",
        TOKENS,
        "Selected log probabilities match those token IDs in length and order.",
    ),
    cap(
        "logprobs.finite_nonpositive",
        "Logprobs are finite and <= 0",
        TOKENS,
        "Selected log probabilities match those token IDs in length and order.",
    ),
    cap(
        "logprobs.topk_consistent",
        "Top-k logprobs are consistent with the selected token",
        RETURNS,
        "Check support and alignment on the exact backend and response path.",
    ),
    cap(
        "logprobs.prompt_alignment",
        "Prompt logprobs keep position 0 undefined, unshifted",
        COMPAT,
        "Prompt log probabilities: vLLM Supported; SGLang Topology-dependent; "
        "TensorRT-LLM No dedicated RL end-to-end coverage recorded here",
        {
            Backend.VLLM: Support.SUPPORTED,
            Backend.SGLANG: Support.TOPOLOGY_DEPENDENT,
            Backend.TRTLLM: Support.UNDOCUMENTED,
        },
    ),
    cap(
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
    ),
    cap(
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
    ),
    cap(
        "stream.single_terminal",
        "Exactly one terminal event per choice",
        STREAM,
        "Treat a streaming request as a state machine: accepted, streaming, terminal success, "
        "canceled, or failed.",
    ),
    cap(
        "stream.nothing_after_terminal",
        "Nothing but usage and [DONE] after the terminal",
        STREAM,
        "Admit only a verified terminal result.",
    ),
    cap(
        "stream.done_last",
        "Streams end with data: [DONE]",
        STREAM,
        "Treat a streaming request as a state machine.",
    ),
    cap(
        "stream.finish_reason",
        "Finish reasons are recognised",
        TOKENS,
        "The response has a terminal state recognized by the framework.",
    ),
    cap(
        "stream.terminal_success",
        "Complete streams reach verified terminal success",
        STREAM,
        "Admit only a verified terminal result.",
    ),
    cap(
        "stream.terminal_reason_verified",
        "Finish reasons are true of the returned sequence",
        "Integration Checklist",
        "Token IDs, log probabilities, masks, and terminal states match the framework contract.",
    ),
)
CAPABILITIES: tuple[Capability, ...] = (*DATA_PLANE, *CONTROL_PLANE)

BY_ID: dict[str, Capability] = {capability.id: capability for capability in CAPABILITIES}


def get(capability_id: str) -> Capability:
    try:
        return BY_ID[capability_id]
    except KeyError:
        raise KeyError(f"unknown capability {capability_id!r}") from None


def unknown_ids_message(ids: Iterable[str]) -> str | None:
    """What is wrong with `--capability` values that name no capability, with the nearest ids;
    None when every id is known."""
    unknown = sorted(set(ids) - set(BY_ID))
    if not unknown:
        return None
    hints = []
    for value in unknown:
        near = difflib.get_close_matches(value, BY_ID, n=3, cutoff=0.75)
        hints.append(f"{value!r}" + (f" (did you mean {', '.join(near)}?)" if near else ""))
    return (
        f"--capability: expected a capability id, observed {'; '.join(hints)}; "
        "`rl-conformance capabilities` lists them"
    )
