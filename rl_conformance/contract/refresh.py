"""Policy refresh: gating, applying, verifying and invalidating.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import ADMIN, REFRESH, STREAM, Backend, Level, Support, row

RECOVERED_WORKER = row(
    "refresh.recovered_worker",
    "A worker whose engine was restarted reports no pre-crash version; its cut streams fail",
    REFRESH,
    "Keep generation gated when membership changes, an update fails, cache reset fails, or "
    "post-update generation does not pass. (Dynamo 1.7.0's native vLLM sidecar restarts a dead "
    "engine by itself; a worker reports the last version declared to it, not the weights loaded "
    "in its GPU memory: RL Integration Reference, "
    "https://docs.nvidia.com/dynamo/dev/reinforcement-learning/rl-integration-reference)",
    {
        Backend.VLLM: Support.SUPPORTED,
        Backend.SGLANG: Support.UNDOCUMENTED,
        Backend.TRTLLM: Support.UNSUPPORTED,
    },
    flipped_by=(
        "crashed_stream_ends_clean",
        "recovered_samples_keep_version",
        "recovered_worker_keeps_version",
    ),
)

PAUSE_GATES = row(
    "refresh.pause_gates",
    "Pause gates new generation until resume",
    REFRESH,
    "Pause or drain workers when the backend requires it.",
    ADMIN,
    asserts="a paused worker admits no new generation until resumed",
    flipped_by=(
        "admits_after_pause",
        "pause_not_applied",
        "pause_reaches_first_worker_only",
        "sidecar_pause_default_keep",
    ),
)

PAUSE_MODE_EFFECT = row(
    "refresh.pause_mode_effect",
    "Each pause mode does to the requests in flight what it names",
    REFRESH,
    "Pause or drain workers when the backend requires it. (Upstream: vLLM's pause_generation "
    "`abort` aborts in-flight requests immediately, `wait` waits for them to complete, `keep` "
    "freezes them until resume_generation, vllm/v1/engine/async_llm.py; SGLang's `abort` "
    "returns them, `in_place` keeps them and `retract` returns them to the waiting queue, both "
    "to continue after continue_generation, python/sglang/srt/managers/io_struct.py.)",
    ADMIN,
    asserts=(
        "each pause mode does to the requests in flight what it names: abort ends them by the "
        "answer, wait lets them finish before it, keep/in_place/retract holds them until the "
        "resume"
    ),
    flipped_by=(
        "in_place_pause_aborts",
        "pause_mode_ignored",
        "retract_pause_aborts",
        "wait_answers_early",
    ),
)

VERSION_VERIFIED = row(
    "refresh.version_verified",
    "Every worker reports the weight version applied",
    REFRESH,
    "Verify every worker and run post-update generation before reopening the fleet.",
    ADMIN,
    asserts="every worker reports the weight version just applied",
    flipped_by=("version_stuck_after_first", "weight_version_unchanged"),
)

POST_UPDATE_GENERATION = row(
    "refresh.post_update_generation",
    "Post-update generation comes from the new weights",
    REFRESH,
    "Verify every worker and run post-update generation before reopening the fleet.",
    ADMIN,
    asserts="generation after an update comes from the new weights",
    flipped_by=("logprobs_nan_after_update", "update_applied_once", "update_keeps_old_weights"),
)

SERVED_POLICY_VERIFIED = row(
    "refresh.served_policy_verified",
    "After an update the served policy is the checkpoint that was sent",
    REFRESH,
    "Transfer and apply one target policy. Verify every worker and run post-update generation "
    "before reopening the fleet.",
    ADMIN,
    asserts="after an update the served policy is the checkpoint that was sent",
    flipped_by=("update_serves_a_mix",),
)

KV_INVALIDATION = row(
    "refresh.kv_invalidation",
    "Flushing invalidates cached prefixes",
    REFRESH,
    "Invalidate stale KV state. (SGLang: `clear_kv_blocks` is a request-plane endpoint, not an "
    "/engine route.)",
    {
        Backend.VLLM: Support.SUPPORTED,
        Backend.SGLANG: Support.TOPOLOGY_DEPENDENT,
        Backend.TRTLLM: Support.UNSUPPORTED,
    },
    asserts="flushing the cache invalidates cached prefixes",
    flipped_by=("flush_works_once", "kv_not_flushed", "retract_flush_skipped"),
)

INFLIGHT_TERMINAL = row(
    "refresh.inflight_terminal",
    "Streams in flight across a refresh end in exactly one terminal state",
    REFRESH,
    "Treat a streaming request as a state machine: accepted, streaming, terminal success, "
    "canceled, or failed.",
    ADMIN,
    flipped_by=(
        "abort_orphans_streams",
        "abort_reported_as_stop",
        "crossed_stream_length_short",
        "crossed_stream_raw_abort",
        "logprobs_nan_across_update",
        "rename_aborts_kept_requests",
        "silent_cancellation",
        "sglang_in_place_update_unflushed",
        "weight_version_misreported",
    ),
)

STRADDLE_REPORTED = row(
    "refresh.straddle_reported",
    "A sample generated across an update names the versions of its tokens truly",
    STREAM,
    "Admit only a verified terminal result. (Upstream: SGLang names the weight version of every "
    "output in `meta_info.weight_version` and per span in `meta_info.weight_versions`, "
    "python/sglang/srt/utils/weight_versions.py; vLLM before 0.34 and TensorRT-LLM name none "
    "per token.)",
    {
        Backend.VLLM: Support.UNSUPPORTED,
        Backend.SGLANG: Support.SUPPORTED,
        Backend.TRTLLM: Support.UNSUPPORTED,
    },
    level=Level.SHOULD,
    asserts="a sample generated across a weight update names the versions of its tokens truly",
    flipped_by=(
        "paused_rename_restamps_tokens",
        "rename_misses_token_record",
        "weight_versions_span_collapsed",
    ),
)

LIFECYCLE = row(
    "refresh.lifecycle",
    "The refresh lifecycle keeps the fleet gated until verified",
    REFRESH,
    "Per-worker success is not fleet-wide atomicity. Keep generation gated when membership "
    "changes, an update fails, cache reset fails, or post-update generation does not pass.",
    ADMIN,
)

ROWS = (
    RECOVERED_WORKER,
    PAUSE_GATES,
    PAUSE_MODE_EFFECT,
    VERSION_VERIFIED,
    POST_UPDATE_GENERATION,
    SERVED_POLICY_VERIFIED,
    KV_INVALIDATION,
    INFLIGHT_TERMINAL,
    STRADDLE_REPORTED,
    LIFECYCLE,
)
"""The rows in the order the matrix shows them."""
