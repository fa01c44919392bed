"""The capability registry: the rows of the compatibility matrix.

Each capability names what it certifies, its level, the spec section and sentence, and the support
the spec documents per backend (its Backend Compatibility table). Documented support decides how an
absent feature is reported: absent where documented `supported` is a failure; absent where the spec
documents anything weaker is `unsupported`. A feature that works where the spec says it does not is
reported as a contradiction of the documentation.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from ..checks.base import Level


class Backend(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"


class Support(StrEnum):
    SUPPORTED = "supported"
    EXPERIMENTAL = "experimental"
    TOPOLOGY_DEPENDENT = "topology-dependent"
    UNSUPPORTED = "unsupported"
    UNDOCUMENTED = "undocumented"


@dataclass(frozen=True)
class Capability:
    id: str
    title: str
    area: str
    level: Level
    section: str
    quote: str
    documented: dict[Backend, Support] = field(default_factory=dict)

    def support_for(self, backend: str) -> Support:
        return self.documented.get(Backend(backend), Support.SUPPORTED)


ALL = {backend: Support.SUPPORTED for backend in Backend}
RL_WORKERS = {
    Backend.VLLM: Support.SUPPORTED,
    Backend.SGLANG: Support.UNSUPPORTED,
    Backend.TRTLLM: Support.UNSUPPORTED,
}

_DISCOVERY = "Discover Workers Safely"
_TOKENS = "Preserve Token Authority"
_RETURNS = "Know What Returns to the Trainer"
_STREAM = "Handle Streaming and Retries"
_COMPAT = "Backend Compatibility"
_ADMIN = "Compare vLLM and SGLang Administration"
_REFRESH = "Coordinate Policy Refresh"
ADMIN = {
    Backend.VLLM: Support.SUPPORTED,
    Backend.SGLANG: Support.SUPPORTED,
    Backend.TRTLLM: Support.UNSUPPORTED,
}


def _cap(
    id: str,
    title: str,
    section: str,
    quote: str,
    documented: dict[Backend, Support] = ALL,
    level: Level = Level.MUST,
) -> Capability:
    return Capability(
        id=id,
        title=title,
        area=id.split(".", 1)[0],
        level=level,
        section=section,
        quote=quote,
        documented=dict(documented),
    )


CAPABILITIES: tuple[Capability, ...] = (
    _cap(
        "discovery.protocol_version",
        "Discovery answers protocol version 1",
        _DISCOVERY,
        "Check protocol_version before reading the worker list.",
    ),
    _cap(
        "discovery.schema",
        "Discovery body matches the protocol v1 schema",
        _DISCOVERY,
        "Optional fields such as model, system_url, admin_base_url, and world_size appear only "
        "when the worker provides them.",
    ),
    _cap(
        "discovery.listener_isolation",
        "Discovery is served on its own listener only",
        "Separate the Three Planes",
        "Discovery: RL listener, normally port 8001. The discovery endpoint is read-only.",
        level=Level.SHOULD,
    ),
    _cap(
        "discovery.worker_registration",
        "RL workers register with /v1/rl/workers",
        _COMPAT,
        "`/v1/rl/workers` registration: vLLM RL-enabled workers; SGLang and TensorRT-LLM not "
        "currently registered",
        RL_WORKERS,
    ),
    _cap(
        "discovery.routes",
        "Advertised routes are strings, sorted and unique",
        _DISCOVERY,
        "`routes`: Worker-advertised Dynamo administration routes",
        RL_WORKERS,
    ),
    _cap(
        "discovery.endpoint_identity",
        "Worker identity: request_plane_url and 64-bit instance ids",
        _DISCOVERY,
        "`namespace`, `component`, `endpoint`, `instance_id`, `transport`, "
        "`request_plane_url`: Stable Dynamo endpoint identity",
        RL_WORKERS,
    ),
    _cap(
        "discovery.identity_not_position",
        "Workers are identified by identity, not list position",
        _DISCOVERY,
        "Do not cache membership indefinitely or interpret list position as worker identity.",
        RL_WORKERS,
        level=Level.SHOULD,
    ),
    _cap(
        "discovery.error_fails_closed",
        "A worker with a probe error fails closed",
        _DISCOVERY,
        "`error`: Probe failure; fail closed when a required worker or route is unavailable",
        RL_WORKERS,
    ),
    _cap(
        "discovery.probe_replies_validated",
        "A worker whose probe reply is refused or an error is listed with routes [] and its error",
        _DISCOVERY,
        "`error`: Probe failure; fail closed when a required worker or route is unavailable. "
        "(Upstream ai-dynamo/dynamo lib/rl/src/lib.rs parse_worker_routes: a reply without a "
        "`routes` array, with a non-string or empty route, an invalid `world_size`, or "
        "`admin_base_url` without a valid `world_size` is a probe failure; a worker's own "
        '`{"status": "error", "message": M}` is listed as M; routes are sorted and '
        "de-duplicated.)",
        RL_WORKERS,
    ),
    _cap(
        "discovery.probe_deadline",
        "A worker that never answers its probe is listed with its error within the deadline",
        _DISCOVERY,
        "`DYN_RL_REQUEST_TIMEOUT_SECS` (default `30`): Bounds each worker descriptor probe. "
        "Discovery can also return a worker with an `error` and an empty route list when its "
        "descriptor probe times out or fails. (Upstream RL Implementation Guide, discovery "
        "listener variables; ai-dynamo/dynamo lib/rl/src/lib.rs describe_worker.)",
        RL_WORKERS,
    ),
    _cap(
        "tokens.token_input",
        "Token input through OpenAI-compatible routes",
        _COMPAT,
        "Token input through OpenAI-compatible routes: Supported on vLLM, SGLang, TensorRT-LLM",
    ),
    _cap(
        "tokens.prompt_ids_echo",
        "nvext.prompt_token_ids echoes the effective prompt",
        _RETURNS,
        "Named `nvext.prompt_token_ids` returns the effective single-prompt token sequence used "
        "after preprocessing, including token arrays or `nvext.token_data`.",
    ),
    _cap(
        "tokens.completion_ids",
        "Completion token ids through named nvext fields",
        _COMPAT,
        "Completion token IDs through named `nvext` fields: Supported (TensorRT-LLM through the "
        "shared response path)",
    ),
    _cap(
        "tokens.choice_count",
        "The expected number of choices",
        _TOKENS,
        "Generated token IDs are present and contain the expected number of choices.",
    ),
    _cap(
        "tokens.usage_consistent",
        "Usage counts agree with the token ids",
        _TOKENS,
        "The engine token sequence used for training is authoritative.",
    ),
    _cap(
        "tokens.stream_concat",
        "Streamed ids concatenate to the unary ids",
        _RETURNS,
        "Use the engine-returned sequence; exact placement depends on the selected interface.",
    ),
    _cap(
        "tokens.text_token_equivalence",
        "Text prompt and its token ids generate alike",
        _TOKENS,
        "Do not reconstruct it by tokenizing generated text.",
    ),
    _cap(
        "tokens.model_identity",
        "Model identity agrees across responses, models and discovery",
        _TOKENS,
        "The tokenizer and model identity match the selected rollout worker.",
    ),
    _cap(
        "tokens.input_tokens_estimate",
        "/v1/responses/input_tokens gives an estimate",
        _TOKENS,
        "POST /v1/responses/input_tokens estimates input size for preflight decisions.",
        level=Level.SHOULD,
    ),
    _cap(
        "logprobs.selected_alignment",
        "Selected logprobs align with the generated ids",
        _TOKENS,
        "Selected log probabilities match those token IDs in length and order.",
    ),
    _cap(
        "logprobs.finite_nonpositive",
        "Logprobs are finite and <= 0",
        _TOKENS,
        "Selected log probabilities match those token IDs in length and order.",
    ),
    _cap(
        "logprobs.topk_consistent",
        "Top-k logprobs are consistent with the selected token",
        _RETURNS,
        "Check support and alignment on the exact backend and response path.",
    ),
    _cap(
        "logprobs.prompt_alignment",
        "Prompt logprobs keep position 0 undefined, unshifted",
        _COMPAT,
        "Prompt log probabilities: vLLM Supported; SGLang Topology-dependent; "
        "TensorRT-LLM No dedicated RL end-to-end coverage recorded here",
        {
            Backend.VLLM: Support.SUPPORTED,
            Backend.SGLANG: Support.TOPOLOGY_DEPENDENT,
            Backend.TRTLLM: Support.UNDOCUMENTED,
        },
    ),
    _cap(
        "generate.native_route",
        "Native RL generation route",
        _COMPAT,
        "Native RL generation route: vLLM experimental unary route; SGLang streaming /generate; "
        "TensorRT-LLM none",
        {
            Backend.VLLM: Support.EXPERIMENTAL,
            Backend.SGLANG: Support.SUPPORTED,
            Backend.TRTLLM: Support.UNSUPPORTED,
        },
    ),
    _cap(
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
    _cap(
        "stream.single_terminal",
        "Exactly one terminal event per choice",
        _STREAM,
        "Treat a streaming request as a state machine: accepted, streaming, terminal success, "
        "canceled, or failed.",
    ),
    _cap(
        "stream.nothing_after_terminal",
        "Nothing but usage and [DONE] after the terminal",
        _STREAM,
        "Admit only a verified terminal result.",
    ),
    _cap(
        "stream.done_last",
        "Streams end with data: [DONE]",
        _STREAM,
        "Treat a streaming request as a state machine.",
    ),
    _cap(
        "stream.finish_reason",
        "Finish reasons are recognised",
        _TOKENS,
        "The response has a terminal state recognized by the framework.",
    ),
    _cap(
        "stream.terminal_success",
        "Complete streams reach verified terminal success",
        _STREAM,
        "Admit only a verified terminal result.",
    ),
    _cap(
        "stream.terminal_reason_verified",
        "Finish reasons are true of the returned sequence",
        "Integration Checklist",
        "Token IDs, log probabilities, masks, and terminal states match the framework contract.",
    ),
    _cap(
        "admin.route_negotiation",
        "Administered workers advertise system_url and the update path's routes",
        _DISCOVERY,
        "Refresh discovery before each control phase and require the complete capability set "
        "for the selected update path.",
        RL_WORKERS,
    ),
    _cap(
        "admin.success_semantics",
        "Admin calls report success by HTTP status and body",
        _ADMIN,
        "Python RL routes commonly return a `status` field; built-in SGLang update routes "
        "commonly return `success` and `message`; check both HTTP status and body",
        ADMIN,
    ),
    _cap(
        "admin.invalid_pause_mode",
        "An invalid pause mode is refused naming it, and the worker keeps serving",
        _ADMIN,
        "Python RL routes commonly return a `status` field; built-in SGLang update routes "
        "commonly return `success` and `message`; check both HTTP status and body. (Upstream: "
        "vLLM's RL tests, "
        "tests/entrypoints/rl/state_transitions/, pin an invalid mode refused with the pause "
        "state unchanged.)",
        ADMIN,
    ),
    _cap(
        "admin.pause_cycles",
        "Repeated and concurrent pauses and resumes are all answered, and the worker serves after",
        _REFRESH,
        "Pause or drain workers when the backend requires it. (Upstream: repeated pause/resume "
        "cycles are idempotent, vLLM tests/entrypoints/rl/state_transitions/; a pause that never "
        "returns, FastDeploy #7825.)",
        ADMIN,
    ),
    _cap(
        "discovery.departure_visible",
        "A worker whose process stops leaves routing and is dropped or marked by discovery",
        _REFRESH,
        "Keep generation gated when membership changes. (Dynamo 1.6.1 lists a stopped worker "
        "with `routes: []` and an `error` until its registration expires, and the frontend "
        "stops routing to it at once.)",
    ),
    _cap(
        "admin.stopped_worker_unrouted",
        "A paused or released worker leaves routing, and rejoins when restored",
        _ADMIN,
        "`release_memory_occupation` unregisters and drains the worker; "
        "`resume_memory_occupation` restores it. (Upstream: Dynamo's SGLang worker follows "
        "SGLang's pause state, the native sidecar's pause and sleep unregister, TensorRT-LLM's "
        "memory routes with --load-format gms; ai-dynamo/dynamo PR #15078, paused workers still "
        "routed to.)",
        {
            Backend.VLLM: Support.UNDOCUMENTED,
            Backend.SGLANG: Support.SUPPORTED,
            Backend.TRTLLM: Support.UNDOCUMENTED,
        },
    ),
    _cap(
        "admin.unpaused_update_refused",
        "An update sent to a running worker that requires a pause is refused",
        _REFRESH,
        "Pause or drain workers when the backend requires it.",
        {
            Backend.VLLM: Support.SUPPORTED,
            Backend.SGLANG: Support.UNSUPPORTED,
            Backend.TRTLLM: Support.UNSUPPORTED,
        },
    ),
    _cap(
        "admin.version_declaration",
        "A worker reports the last weight version declared to it",
        "Read and Declare the Weight Version",
        "Version declarations accept any JSON value, including `null`. An explicit "
        '`{"weight_version": null}` is a declaration: `get_weight_version` then returns '
        '`"version": null` with `"version_declared": true`. If the request omits '
        '`weight_version`, the reply contains `"version": "unknown"` and '
        '`"version_declared": false`, and the previous declaration remains unchanged. '
        "(Upstream integration reference, "
        "https://docs.nvidia.com/dynamo/dev/reinforcement-learning/rl-integration-reference)",
        RL_WORKERS,
    ),
    _cap(
        "refresh.recovered_worker",
        "A worker whose engine was restarted reports no pre-crash version; its cut streams fail",
        _REFRESH,
        "Keep generation gated when membership changes, an update fails, cache reset fails, or "
        "post-update generation does not pass. (Dynamo 1.7.0's native vLLM sidecar restarts a "
        "dead engine by itself; a worker reports the last version declared to it, not the "
        "weights loaded in its GPU memory: RL Integration Reference, "
        "https://docs.nvidia.com/dynamo/dev/reinforcement-learning/rl-integration-reference)",
        {
            Backend.VLLM: Support.SUPPORTED,
            Backend.SGLANG: Support.UNDOCUMENTED,
            Backend.TRTLLM: Support.UNSUPPORTED,
        },
    ),
    _cap(
        "admin.distributed_update",
        "The distributed update and update_weight_version declare their version in order, and "
        "fail closed",
        _ADMIN,
        "Apply weights: Python disk or distributed update routes and group lifecycle; native "
        "sidecar init/start/update/finish routes when weight transfer is enabled. Weight "
        "version: `update_weight_version` changes metadata and can abort requests; it does not "
        "replace tensors. (The transport, an NCCL group with the trainer's ranks, is not "
        "exercised by this suite.)",
        ADMIN,
    ),
    _cap(
        "refresh.pause_gates",
        "Pause gates new generation until resume",
        _REFRESH,
        "Pause or drain workers when the backend requires it.",
        ADMIN,
    ),
    _cap(
        "refresh.pause_mode_effect",
        "Each pause mode does to the requests in flight what it names",
        _REFRESH,
        "Pause or drain workers when the backend requires it. (Upstream: vLLM's "
        "pause_generation `abort` aborts in-flight requests immediately, `wait` waits for them "
        "to complete, `keep` freezes them until resume_generation, vllm/v1/engine/async_llm.py; "
        "SGLang's `abort` returns them, `in_place` keeps them and `retract` returns them to "
        "the waiting queue, both to continue after continue_generation, "
        "python/sglang/srt/managers/io_struct.py.)",
        ADMIN,
    ),
    _cap(
        "admin.resume_serves_promptly",
        "A generation sent right after a resume is served promptly",
        _REFRESH,
        "Pause or drain workers when the backend requires it. (Upstream: vLLM's "
        "resume_generation and SGLang's continue_generation reopen scheduling when they answer; "
        "a resume that answers while generation stays held passes every check of its answer.)",
        ADMIN,
        level=Level.SHOULD,
    ),
    _cap(
        "refresh.version_verified",
        "Every worker reports the weight version applied",
        _REFRESH,
        "Verify every worker and run post-update generation before reopening the fleet.",
        ADMIN,
    ),
    _cap(
        "refresh.post_update_generation",
        "Post-update generation comes from the new weights",
        _REFRESH,
        "Verify every worker and run post-update generation before reopening the fleet.",
        ADMIN,
    ),
    _cap(
        "refresh.served_policy_verified",
        "After an update the served policy is the checkpoint that was sent",
        _REFRESH,
        "Transfer and apply one target policy. Verify every worker and run post-update "
        "generation before reopening the fleet.",
        ADMIN,
    ),
    _cap(
        "refresh.kv_invalidation",
        "Flushing invalidates cached prefixes",
        _REFRESH,
        "Invalidate stale KV state. (SGLang: `clear_kv_blocks` is a request-plane endpoint, "
        "not an /engine route.)",
        {
            Backend.VLLM: Support.SUPPORTED,
            Backend.SGLANG: Support.TOPOLOGY_DEPENDENT,
            Backend.TRTLLM: Support.UNSUPPORTED,
        },
    ),
    _cap(
        "refresh.inflight_terminal",
        "Streams in flight across a refresh end in exactly one terminal state",
        _REFRESH,
        "Treat a streaming request as a state machine: accepted, streaming, terminal success, "
        "canceled, or failed.",
        ADMIN,
    ),
    _cap(
        "refresh.straddle_reported",
        "A sample generated across an update names the versions of its tokens truly",
        _STREAM,
        "Admit only a verified terminal result. (Upstream: SGLang names the weight version of "
        "every output in `meta_info.weight_version` and per span in `meta_info.weight_versions`, "
        "python/sglang/srt/utils/weight_versions.py; vLLM before 0.34 and TensorRT-LLM name none "
        "per token.)",
        {
            Backend.VLLM: Support.UNSUPPORTED,
            Backend.SGLANG: Support.SUPPORTED,
            Backend.TRTLLM: Support.UNSUPPORTED,
        },
        level=Level.SHOULD,
    ),
    _cap(
        "refresh.lifecycle",
        "The refresh lifecycle keeps the fleet gated until verified",
        _REFRESH,
        "Per-worker success is not fleet-wide atomicity. Keep generation gated when "
        "membership changes, an update fails, cache reset fails, or post-update generation does "
        "not pass.",
        ADMIN,
    ),
    _cap(
        "namespace.scope",
        "The RL listener's namespace scope follows its environment",
        "Scope Discovery by Namespace",
        "The RL listener reads the set of Dynamo namespaces it searches from its own process "
        "environment, and from nothing else.",
        RL_WORKERS,
    ),
    _cap(
        "cancel.propagation",
        "A client's cancellation reaches the engine",
        _STREAM,
        "Dynamo propagates supported cancellations and serving failures.",
    ),
    _cap(
        "retry.attempt_identity",
        "Attempts stay identifiable across retries",
        _STREAM,
        "Preserve attempt identity when retrying, because a timed-out request may have completed "
        "after the client stopped waiting and generation is not idempotent.",
    ),
    _cap(
        "migration.continuity",
        "A stream whose worker died continues elsewhere with no id lost or repeated",
        _STREAM,
        "Admit only a verified terminal result. (Dynamo's request migration guide, "
        "https://docs.nvidia.com/dynamo/dev/kubernetes/fault-tolerance/request-migration: with "
        "--migration-limit above 0, a request whose worker fails mid-generation continues on a "
        "healthy worker from the exact point of failure, no tokens lost or duplicated, and no "
        "interruption visible to the client.)",
    ),
    _cap(
        "telemetry.bounded_labels",
        "Metrics carry no high-cardinality labels",
        "Integration Checklist",
        "Framework identity can be correlated with Dynamo telemetry without high-cardinality "
        "metric labels.",
        level=Level.SHOULD,
    ),
    _cap(
        "telemetry.trace_correlation",
        "Framework attempts correlate with Dynamo's request trace",
        "Integration Checklist",
        "Framework identity can be correlated with Dynamo telemetry without high-cardinality "
        "metric labels.",
        level=Level.SHOULD,
    ),
    _cap(
        "errors.validation",
        "Invalid requests are rejected with 4xx and a flat error body",
        "Integration Checklist",
        "Request, worker, and update failures have a tested recovery path.",
    ),
)

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
