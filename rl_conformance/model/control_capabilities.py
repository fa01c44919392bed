"""The control-plane rows of the capability registry: worker administration, policy refresh,
namespaces, cancellation and retries, migration, telemetry and validation errors."""

from __future__ import annotations

from ..checks.base import Level
from .capability_kinds import (
    ADMIN,
    ADMIN_SECTION,
    DISCOVERY,
    REFRESH,
    RL_WORKERS,
    STREAM,
    Backend,
    Capability,
    Support,
    cap,
)

CONTROL_PLANE: tuple[Capability, ...] = (
    cap(
        "admin.route_negotiation",
        "Administered workers advertise system_url and the update path's routes",
        DISCOVERY,
        "Refresh discovery before each control phase and require the complete capability set "
        "for the selected update path.",
        RL_WORKERS,
    ),
    cap(
        "admin.success_semantics",
        "Admin calls report success by HTTP status and body",
        ADMIN_SECTION,
        "Python RL routes commonly return a `status` field; built-in SGLang update routes "
        "commonly return `success` and `message`; check both HTTP status and body",
        ADMIN,
    ),
    cap(
        "admin.invalid_pause_mode",
        "An invalid pause mode is refused naming it, and the worker keeps serving",
        ADMIN_SECTION,
        "Python RL routes commonly return a `status` field; built-in SGLang update routes "
        "commonly return `success` and `message`; check both HTTP status and body. (Upstream: "
        "vLLM's RL tests, "
        "tests/entrypoints/rl/state_transitions/, pin an invalid mode refused with the pause "
        "state unchanged.)",
        ADMIN,
    ),
    cap(
        "admin.pause_cycles",
        "Repeated and concurrent pauses and resumes are all answered, and the worker serves after",
        REFRESH,
        "Pause or drain workers when the backend requires it. (Upstream: repeated pause/resume "
        "cycles are idempotent, vLLM tests/entrypoints/rl/state_transitions/; a pause that never "
        "returns, FastDeploy #7825.)",
        ADMIN,
    ),
    cap(
        "discovery.departure_visible",
        "A worker whose process stops leaves routing and is dropped or marked by discovery",
        REFRESH,
        "Keep generation gated when membership changes. (Dynamo 1.6.1 lists a stopped worker "
        "with `routes: []` and an `error` until its registration expires, and the frontend "
        "stops routing to it at once.)",
    ),
    cap(
        "admin.stopped_worker_unrouted",
        "A paused or released worker leaves routing, and rejoins when restored",
        ADMIN_SECTION,
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
    cap(
        "admin.unpaused_update_refused",
        "An update sent to a running worker that requires a pause is refused",
        REFRESH,
        "Pause or drain workers when the backend requires it.",
        {
            Backend.VLLM: Support.SUPPORTED,
            Backend.SGLANG: Support.UNSUPPORTED,
            Backend.TRTLLM: Support.UNSUPPORTED,
        },
    ),
    cap(
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
    cap(
        "refresh.recovered_worker",
        "A worker whose engine was restarted reports no pre-crash version; its cut streams fail",
        REFRESH,
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
    cap(
        "admin.distributed_update",
        "The distributed update and update_weight_version declare their version in order, and "
        "fail closed",
        ADMIN_SECTION,
        "Apply weights: Python disk or distributed update routes and group lifecycle; native "
        "sidecar init/start/update/finish routes when weight transfer is enabled. Weight "
        "version: `update_weight_version` changes metadata and can abort requests; it does not "
        "replace tensors. (The transport, an NCCL group with the trainer's ranks, is not "
        "exercised by this suite.)",
        ADMIN,
    ),
    cap(
        "refresh.pause_gates",
        "Pause gates new generation until resume",
        REFRESH,
        "Pause or drain workers when the backend requires it.",
        ADMIN,
    ),
    cap(
        "refresh.pause_mode_effect",
        "Each pause mode does to the requests in flight what it names",
        REFRESH,
        "Pause or drain workers when the backend requires it. (Upstream: vLLM's "
        "pause_generation `abort` aborts in-flight requests immediately, `wait` waits for them "
        "to complete, `keep` freezes them until resume_generation, vllm/v1/engine/async_llm.py; "
        "SGLang's `abort` returns them, `in_place` keeps them and `retract` returns them to "
        "the waiting queue, both to continue after continue_generation, "
        "python/sglang/srt/managers/io_struct.py.)",
        ADMIN,
    ),
    cap(
        "admin.resume_serves_promptly",
        "A generation sent right after a resume is served promptly",
        REFRESH,
        "Pause or drain workers when the backend requires it. (Upstream: vLLM's "
        "resume_generation and SGLang's continue_generation reopen scheduling when they answer; "
        "a resume that answers while generation stays held passes every check of its answer.)",
        ADMIN,
        level=Level.SHOULD,
    ),
    cap(
        "refresh.version_verified",
        "Every worker reports the weight version applied",
        REFRESH,
        "Verify every worker and run post-update generation before reopening the fleet.",
        ADMIN,
    ),
    cap(
        "refresh.post_update_generation",
        "Post-update generation comes from the new weights",
        REFRESH,
        "Verify every worker and run post-update generation before reopening the fleet.",
        ADMIN,
    ),
    cap(
        "refresh.served_policy_verified",
        "After an update the served policy is the checkpoint that was sent",
        REFRESH,
        "Transfer and apply one target policy. Verify every worker and run post-update "
        "generation before reopening the fleet.",
        ADMIN,
    ),
    cap(
        "refresh.kv_invalidation",
        "Flushing invalidates cached prefixes",
        REFRESH,
        "Invalidate stale KV state. (SGLang: `clear_kv_blocks` is a request-plane endpoint, "
        "not an /engine route.)",
        {
            Backend.VLLM: Support.SUPPORTED,
            Backend.SGLANG: Support.TOPOLOGY_DEPENDENT,
            Backend.TRTLLM: Support.UNSUPPORTED,
        },
    ),
    cap(
        "refresh.inflight_terminal",
        "Streams in flight across a refresh end in exactly one terminal state",
        REFRESH,
        "Treat a streaming request as a state machine: accepted, streaming, terminal success, "
        "canceled, or failed.",
        ADMIN,
    ),
    cap(
        "refresh.straddle_reported",
        "A sample generated across an update names the versions of its tokens truly",
        STREAM,
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
    cap(
        "refresh.lifecycle",
        "The refresh lifecycle keeps the fleet gated until verified",
        REFRESH,
        "Per-worker success is not fleet-wide atomicity. Keep generation gated when "
        "membership changes, an update fails, cache reset fails, or post-update generation does "
        "not pass.",
        ADMIN,
    ),
    cap(
        "namespace.scope",
        "The RL listener's namespace scope follows its environment",
        "Scope Discovery by Namespace",
        "The RL listener reads the set of Dynamo namespaces it searches from its own process "
        "environment, and from nothing else.",
        RL_WORKERS,
    ),
    cap(
        "cancel.propagation",
        "A client's cancellation reaches the engine",
        STREAM,
        "Dynamo propagates supported cancellations and serving failures.",
    ),
    cap(
        "retry.attempt_identity",
        "Attempts stay identifiable across retries",
        STREAM,
        "Preserve attempt identity when retrying, because a timed-out request may have completed "
        "after the client stopped waiting and generation is not idempotent.",
    ),
    cap(
        "migration.continuity",
        "A stream whose worker died continues elsewhere with no id lost or repeated",
        STREAM,
        "Admit only a verified terminal result. (Dynamo's request migration guide, "
        "https://docs.nvidia.com/dynamo/dev/kubernetes/fault-tolerance/request-migration: with "
        "--migration-limit above 0, a request whose worker fails mid-generation continues on a "
        "healthy worker from the exact point of failure, no tokens lost or duplicated, and no "
        "interruption visible to the client.)",
    ),
    cap(
        "telemetry.bounded_labels",
        "Metrics carry no high-cardinality labels",
        "Integration Checklist",
        "Framework identity can be correlated with Dynamo telemetry without high-cardinality "
        "metric labels.",
        level=Level.SHOULD,
    ),
    cap(
        "telemetry.weight_update_gauge",
        "The weight-transfer in-flight gauge returns to 0 after a successful and a refused step",
        REFRESH,
        "Keep generation gated when membership changes, an update fails, cache reset fails, or "
        "post-update generation does not pass. (vLLM's RL metrics contract: "
        "vllm:rl_weight_update_operations_in_flight returns to 0 after a failed and after a "
        "cancelled update; vllm/entrypoints/rl/online/metrics.py, vllm 0.32.0.)",
        {
            Backend.VLLM: Support.SUPPORTED,
            Backend.SGLANG: Support.UNSUPPORTED,
            Backend.TRTLLM: Support.UNSUPPORTED,
        },
        level=Level.SHOULD,
    ),
    cap(
        "telemetry.trace_correlation",
        "Framework attempts correlate with Dynamo's request trace",
        "Integration Checklist",
        "Framework identity can be correlated with Dynamo telemetry without high-cardinality "
        "metric labels.",
        level=Level.SHOULD,
    ),
    cap(
        "errors.validation",
        "Invalid requests are rejected with 4xx and a flat error body",
        "Integration Checklist",
        "Request, worker, and update failures have a tested recovery path.",
    ),
)
