"""The control-plane half of the fake deployment's fault catalogue: worker administration,
discovery, requests across control steps, and telemetry."""

from __future__ import annotations

from fake_backends.faults.catalogue import Fault
from fake_backends.faults.kinds import (
    ADMIN_BACKENDS,
    RL_BACKENDS,
    SGLANG,
    SIDECAR,
    fault,
)

CONTROL_PLANE_FAULTS: tuple[Fault, ...] = (
    # -- control plane: worker administration -------------------------------------------
    fault(
        "admin_http200_failure_body",
        "weight updates from disk (and the sidecar's finish_weight_update) answer HTTP 200 "
        "with a failure body (status error / success false) even when paused; nothing loads",
        ADMIN_BACKENDS,
    ),
    fault(
        "pause_not_applied",
        "pause is acknowledged (and updates accepted) but generation goes on: nothing is "
        "held, frozen or aborted",
        ADMIN_BACKENDS,
    ),
    fault(
        "pause_reaches_first_worker_only",
        "a pause is acknowledged by every worker but applied by the deployment's first only: "
        "the others go on generating (a fan-out that stops at its first target)",
        ADMIN_BACKENDS,
    ),
    fault(
        "distributed_update_without_group",
        "update_weights_from_distributed loads the weights and answers ok with no weight "
        "update group formed (before init_weights_update_group, after its destruction)",
        RL_BACKENDS,
    ),
    fault(
        "distributed_version_not_declared",
        "a distributed weight update loads the weights and answers ok but ignores the "
        "weight_version it names (the worker keeps reporting the old one)",
        ADMIN_BACKENDS,
    ),
    fault(
        "distributed_update_fails_open",
        "a distributed weight update whose body the engine's schema refuses (a non-boolean "
        "flag, SGLang's required names missing) answers success and loads nothing",
        ADMIN_BACKENDS,
    ),
    fault(
        "version_update_fails_open",
        "update_weight_version without new_version answers success and declares nothing",
        SGLANG | SIDECAR,
    ),
    fault(
        "invalid_pause_mode_accepted",
        "pause_generation with a mode the engine does not have pauses in keep mode and answers ok",
        RL_BACKENDS,
    ),
    fault(
        "sglang_invalid_pause_mode_crashes",
        "pause_generation with a mode the engine does not have answers 200 ok, then the "
        "worker dies: its system server answers nothing more and it leaves routing",
        SGLANG,
    ),
    fault(
        "sglang_in_place_update_unflushed",
        "an update while an in_place pause holds a request loads the weights and version but "
        "answers success false, the cache not flushed (SGLang 0.5.23's documented refusal)",
        SGLANG,
    ),
    fault(
        "invalid_pause_mode_pauses",
        "pause_generation refuses a mode the engine does not have, yet pauses the worker",
        RL_BACKENDS,
    ),
    fault(
        "unpaused_update_applied",
        "update_weights_from_disk loads the weights on a worker that is not paused",
        RL_BACKENDS,
    ),
    fault(
        "abort_orphans_streams",
        "a stream whose request the worker aborts (a pause in abort mode) is left without a "
        "terminal: the connection closes after the tokens released, no terminal chunk, no "
        "[DONE] (vllm-project/tpu-inference #3362)",
        ADMIN_BACKENDS,
    ),
    fault(
        "departed_worker_listed",
        "a worker whose process went away stays listed by /v1/rl/workers as healthy (its "
        "routes and system_url, no error)",
        RL_BACKENDS,
        slow=True,
    ),
    fault(
        "recovered_worker_keeps_version",
        "a worker whose engine died and was restarted on its starting weights still reports "
        "the version declared before the crash",
        ADMIN_BACKENDS,
    ),
    fault(
        "logprobs_nan_across_update",
        "a stream in flight while its worker loads new weights (held by a pause that keeps "
        "it) reports NaN for every logprob of the tokens after the update, its ids still "
        "right (NeMo RL #2180: an update that overlaps generation)",
        ADMIN_BACKENDS,
    ),
    fault(
        "recovered_samples_keep_version",
        "a worker whose engine died and was restarted on its starting weights reports nothing "
        "declared, but its generations still name the version declared before the crash: "
        "samples of the starting weights look fresher than they are",
        ADMIN_BACKENDS,
    ),
    fault(
        "crashed_stream_ends_clean",
        "a stream whose engine died under it ends with a terminal chunk (finish stop) and "
        "[DONE], as if it had finished",
    ),
    fault(
        "migration_repeats_splice_token",
        "a stream moved to another worker when its worker's process died (--migration-limit) "
        "sends the last token before the splice again: one id, its text and its logprob "
        "twice",
    ),
    fault(
        "metadata_upload_refusals_reworded",
        "the frontend refuses an nvext.metadata_upload it cannot read (Dynamo 1.7's forms) "
        "with serde's generic wording instead of the reason",
    ),
    fault(
        "generation_artifact_limits_unchecked",
        "a generation-artifact metadata_upload with stop strings or several choices is not "
        "refused with 400 (it is answered as any artifact request is: 500)",
    ),
    fault(
        "null_version_undeclared",
        'set_weight_version {"weight_version": null} declares nothing: the worker keeps '
        "reporting the version declared before it",
        RL_BACKENDS,
    ),
    fault(
        "unversioned_update_declares",
        "update_weights_from_disk without weight_version declares 'unknown': the worker "
        "reports it instead of the version declared before (its reply still says "
        "version_declared false)",
        RL_BACKENDS,
    ),
    fault(
        "probe_reply_unvalidated",
        "the RL listener lists a worker's route-probe reply as it came: no routes array, "
        "a non-string or empty route, an invalid world_size are listed without an error",
        RL_BACKENDS,
    ),
    fault(
        "probe_worker_error_replaced",
        "a worker's own probe error {status: error, message: M} is listed as 'worker routes "
        "request failed' instead of M",
        RL_BACKENDS,
    ),
    fault(
        "probe_deadline_ignored",
        "the RL listener waits for a worker that never answers its route probe past "
        "DYN_RL_REQUEST_TIMEOUT_SECS: the whole read hangs",
        RL_BACKENDS,
        slow=True,
    ),
    fault(
        "probe_timeout_fails_all",
        "one route probe past its deadline lists every worker with the timeout error",
        RL_BACKENDS,
    ),
    fault(
        "stopped_worker_listed",
        "a paused or released SGLang worker stays listed for routing: the frontend's /health "
        "keeps its generate instance (ai-dynamo/dynamo PR #15078)",
        SGLANG,
        slow=True,
    ),
    fault(
        "second_pause_hangs",
        "a pause_generation sent while the worker is paused is answered only after another "
        "caller resumes it (FastDeploy #7825)",
        RL_BACKENDS,
        slow=True,
    ),
    fault(
        "pause_mode_ignored",
        "pause_generation accepts abort and wait, and answers naming them, but applies keep: "
        "requests in flight freeze until the resume instead of ending or finishing (the mode "
        "never reaches the engine, as a Ray Serve wrapper review found)",
        ADMIN_BACKENDS,
    ),
    fault(
        "wait_answers_early",
        "a wait pause answers at once with the streams in flight frozen mid-way; they finish "
        "only after the resume, under the weights loaded meanwhile",
        ADMIN_BACKENDS,
    ),
    fault(
        "in_place_pause_aborts",
        "SGLang's in_place pause aborts the requests in flight instead of holding them until "
        "continue_generation",
        SGLANG,
    ),
    fault(
        "sglang_second_pause_fails",
        "a pause_generation sent while the worker is paused answers HTTP 500 (the real "
        "Dynamo 1.6.1 SGLang worker with file discovery cannot leave discovery twice)",
        SGLANG,
    ),
    fault(
        "retract_pause_aborts",
        "SGLang's retract pause aborts the requests in flight instead of returning them to "
        "the waiting queue to continue after continue_generation",
        SGLANG,
    ),
    fault(
        "retract_flush_skipped",
        "after a retract pause, flush_cache answers success and flushes nothing (the requests "
        "returned to the waiting queue counted as running, the skip said only in the logs): "
        "stale prefixes survive a reset the caller was told succeeded",
        SGLANG,
    ),
    fault(
        "rename_aborts_kept_requests",
        "update_weight_version aborts the requests in flight, running or retracted, even when "
        "the caller asked to keep them (abort_all_requests false)",
        SGLANG,
    ),
    fault(
        "pause_counted_per_caller",
        "pauses are counted: a worker paused twice holds generation until it is resumed twice",
        ADMIN_BACKENDS,
    ),
    fault(
        "pause_counted_past_first_worker",
        "pauses are counted on every worker but the deployment's first: paused twice, they "
        "hold generation until resumed twice (a fault a suite judging one worker misses)",
        ADMIN_BACKENDS,
    ),
    fault(
        "resume_slow",
        "a resume answers ok, but new generation stays held for 3.5 s after it",
        ADMIN_BACKENDS,
        slow=True,
    ),
    fault(
        "admits_after_pause",
        "a request that arrives once a pause answered is admitted and generates: an abort or "
        "wait pause gates only what it found in flight (vllm-project/vllm #33926, #51476); "
        "a keep pause still freezes it before its first token",
        ADMIN_BACKENDS,
    ),
    fault(
        "weight_version_unchanged",
        "weight updates answer ok with the new version but the worker keeps the old one",
        ADMIN_BACKENDS,
    ),
    fault(
        "update_keeps_old_weights",
        "weight updates answer ok and change the version, but tokens come from the old weights",
        ADMIN_BACKENDS,
    ),
    fault(
        "update_serves_a_mix",
        "weight updates answer ok and change the version, but the worker then serves "
        "weights that are neither the old nor the new checkpoint (a partial load): the "
        "output changes, the policy is not the checkpoint sent",
        ADMIN_BACKENDS,
    ),
    fault(
        "logprobs_nan_after_update",
        "once a worker has loaded new weights, every log probability it reports is NaN while "
        "its token ids stay right (an update that overlaps generation: NVIDIA-NeMo/RL #2180)",
        ADMIN_BACKENDS,
    ),
    fault(
        "update_applied_once",
        "a worker's first weight update swaps its weights; every later one answers ok and "
        "declares its version but keeps the weights of the first (a refit path that works "
        "once)",
        ADMIN_BACKENDS,
    ),
    fault(
        "version_stuck_after_first",
        "a worker reports the first weight version it declared after every later update "
        "(the weights do change)",
        ADMIN_BACKENDS,
    ),
    fault(
        "flush_works_once",
        "a worker's prefix cache is cleared by the first flush a route asks for (the flush "
        "route, a pause with clear_cache) only; later ones answer ok and keep it (the cache "
        "survives the next refits: NeMo RL #4018)",
        ADMIN_BACKENDS,
    ),
    fault(
        "kv_not_flushed",
        "cache flushes and weight updates answer ok but the prefix cache is kept "
        "(cached_tokens unchanged)",
        ADMIN_BACKENDS,
    ),
    fault(
        "sidecar_status_words",
        'the native sidecar\'s pause and resume answer {"status": "ok"} instead of '
        'vLLM\'s "paused" / "resumed"',
        SIDECAR,
    ),
    fault(
        "weight_update_gauge_stuck",
        "a weight-transfer step that fails leaves vllm:rl_weight_update_operations_in_flight at 1 "
        "for its operation (the decrement skipped on the error path)",
        SIDECAR,
    ),
    fault(
        "sidecar_pause_default_keep",
        "the native sidecar's pause without a mode keeps requests in place (the Python "
        "worker's default) instead of aborting them (vLLM's default)",
        SIDECAR,
    ),
    fault(
        "sidecar_partial_transfer_routes",
        "sidecar worker 0 lists the weight-transfer routes without "
        "update/finish_weight_update (it still serves it)",
        SIDECAR,
    ),
    fault(
        "unknown_route_200",
        'an unknown /engine/<route> answers HTTP 200 {"status": "ok"} instead of the 404',
        ADMIN_BACKENDS,
    ),
    # -- control plane: discovery ---------------------------------------------------------
    fault(
        "namespace_prefix_matches_ns2",
        "DYN_NAMESPACE_PREFIX matching ignores the '-' boundary: prefix ns also lists ns2",
        RL_BACKENDS,
    ),
    fault(
        "empty_prefix_global",
        "an empty DYN_NAMESPACE_PREFIX is read as every namespace instead of as absent",
        RL_BACKENDS,
    ),
    fault("system_url_absent", "vLLM worker 0 is listed without system_url", RL_BACKENDS),
    fault(
        "rl_listener_gateway_body",
        "GET /v1/rl/workers answers the SGLang Model Gateway's body (protocol_version 1, "
        "workers with id/url/engine, a total) instead of Dynamo's",
        RL_BACKENDS,
    ),
    fault(
        "routes_renamed",
        "worker 0 advertises its routes prefixed with 'engine/' while serving the unprefixed names",
        RL_BACKENDS,
    ),
    fault(
        "required_route_missing",
        "worker 0 does not advertise update_weights_from_disk (it still serves it)",
        RL_BACKENDS,
    ),
    # -- control plane: requests and telemetry ---------------------------------------------
    fault(
        "cancellation_not_propagated",
        "a client disconnect is ignored: generation runs to the end, the ledger says completed",
    ),
    fault(
        "late_response_delivered_twice",
        "a retry reusing the x-request-id of a still-running attempt is answered with that "
        "attempt's response; both attempts complete",
    ),
    fault(
        "metrics_high_cardinality",
        "/metrics labels dynamo_frontend_requests_total with each request's id",
    ),
    fault(
        "matched_stop_id_dropped",
        "a choice that ends on a stop id or EOS loses that id from its sequence (ids, "
        "logprobs and usage still agree: ai-dynamo/dynamo #14302)",
    ),
    fault(
        "abort_reported_as_stop",
        "an aborted request's nvext.detailed_finish_reason says stop, as its finish_reason "
        "does: a truncated rollout looks finished (ai-dynamo/dynamo #14418)",
    ),
    fault(
        "crossed_stream_length_short",
        "a request an abort cut short (a pause in abort mode, a rename that aborts) reports "
        "finish_reason length, and detailed_finish_reason length, with fewer than max_tokens "
        "ids (SkyRL #1250: an abort that looks like a finished rollout)",
    ),
    fault(
        "crossed_stream_raw_abort",
        "a request an abort cut short reports the engine's raw finish_reason 'abort' "
        "(vLLM's FinishReason.ABORT) instead of Dynamo's 'stop'",
    ),
    fault(
        "length_reported_as_stop",
        "a choice that reaches max_tokens reports finish_reason stop",
    ),
    fault(
        "metrics_rl_attempt_label",
        "/metrics labels dynamo_frontend_requests_total with each request's X-RL-Attempt-ID",
    ),
    fault(
        "trace_stream_headers_dropped",
        "the request trace's payload rows of streamed chat requests carry no captured headers",
        slow=True,
    ),
    fault(
        "trace_stream_end_missing",
        "streamed requests get no request_end row in the request trace",
    ),
)
