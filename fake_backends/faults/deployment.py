"""The catalogue of named contract violations and the set that is switched on.

Why faults: a conformance suite is only trustworthy if each of its checks has been seen
to fail.  Every fault breaks exactly one rule of the contract, deterministically, on every
request it applies to, so a test can switch it on and expect a specific check to fire.
Code consults the active set with ``faults.active("name")``; asking for a name that is
not in the catalogue is a programming error and raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fake_backends.faults.catalogue import ActiveFaults, Catalogue, Fault, UnknownFaultError

__all__ = [
    "CATALOGUE",
    "FAULTS",
    "FAULT_NAMES",
    "ActiveFaults",
    "Fault",
    "UnknownFaultError",
    "active_faults",
    "catalogue_lines",
]

ALL_BACKENDS = frozenset({"vllm", "sglang", "trtllm"})
_PROMPT_LOGPROB_BACKENDS = frozenset({"vllm", "sglang"})
_RL_BACKENDS = frozenset({"vllm"})
_SGLANG = frozenset({"sglang"})
_ADMIN_BACKENDS = frozenset({"vllm", "sglang"})  # workers with a system server
_SIDECAR = frozenset({"vllm-sidecar"})  # vLLM with the native sidecar's routes


def _fault(
    name: str, description: str, backends: frozenset[str] = ALL_BACKENDS, *, slow: bool = False
) -> Fault:
    return Fault(name, description, backends, slow=slow)


CATALOGUE = Catalogue(
    "fault",
    (
        _fault(
            "prompt_logprobs_shifted_by_one",
            "prompt logprob entries move one position right: [null, null, e1, ..., e(m-2)]",
            _PROMPT_LOGPROB_BACKENDS,
        ),
        _fault(
            "prompt_logprobs_leading_null_dropped",
            "prompt logprobs lose the undefined first position: [e1, ..., e(m-1)], length m-1",
            _PROMPT_LOGPROB_BACKENDS,
        ),
        _fault(
            "selected_logprobs_one_short",
            "selected-token logprob arrays lose their last entry (n ids, n-1 logprobs)",
        ),
        _fault("logprobs_reordered", "selected-token logprob arrays are reversed"),
        _fault(
            "logprobs_absent",
            "logprobs requested are not returned: completions choices lack the 'logprobs' key, "
            "chat choices have logprobs null (streams too)",
        ),
        _fault(
            "completion_ids_retokenized",
            "nvext.completion_token_ids are a byte-level re-tokenization of the generated text",
        ),
        _fault(
            "prompt_ids_with_unsent_bos",
            "nvext.prompt_token_ids gain a BOS (id 1) that was never sent to the engine",
        ),
        _fault("completion_ids_missing", "nvext.completion_token_ids are never emitted"),
        _fault(
            "prompt_ids_missing",
            "nvext.prompt_token_ids are never emitted, even when selected "
            "(completion_token_ids still are)",
        ),
        _fault("wrong_choice_count", "responses carry one more choice than requested"),
        _fault("positive_logprob", "the first selected logprob is +0.5"),
        _fault("nan_logprob", "the first selected logprob is NaN (bare JSON token NaN)"),
        _fault(
            "topk_missing_selected",
            "top logprobs never include the sampled token (k-1 others when it was in the top-k)",
        ),
        _fault(
            "stop_reason_in_choices",
            "completions choices carry stop_reason (as vLLM's own server does) whether or not "
            "nvext.extra_fields asked for it; Dynamo reports it only as nvext.stop_reason",
        ),
        _fault(
            "finish_reason_missing",
            "the terminal chunk / non-stream choice has finish_reason null",
        ),
        _fault("double_terminal", "the terminal chunk of each choice is sent twice"),
        _fault("done_missing", "streams end without data: [DONE]"),
        _fault(
            "content_after_terminal",
            "one more text chunk is sent for a choice after its terminal chunk",
        ),
        _fault(
            "usage_counts_wrong",
            "usage.completion_tokens is one too high (total_tokens consistent with it)",
        ),
        _fault(
            "usage_chunk_miscounts",
            "a stream's usage chunk (stream_options.include_usage) counts one completion token "
            "more than the stream carried (total_tokens consistent with it); unary usage is right",
        ),
        _fault(
            "chat_top_logprobs_short",
            "chat top_logprobs lists lose their last entry: k-1 alternatives for top_logprobs k",
        ),
        _fault(
            "stream_index_swapped",
            "a stream with n > 1 choices sends choice 0's chunks under index 1 and choice 1's "
            "under index 0",
        ),
        _fault(
            "stop_string_drops_last_id",
            "a choice that ends on a stop string loses the token that completed it from its ids, "
            "logprobs and usage (its text, cut before the stop string, is kept)",
        ),
        _fault(
            "model_identity_mismatch",
            "responses name model 'other-model' while /v1/models lists the served one",
        ),
        _fault(
            "stream_ids_differ",
            "in streams, the last chunk's completion token ids are dropped",
        ),
        _fault(
            "text_prompt_differs",
            "a string prompt gets an unreported BOS prepended, so text and token prompts differ",
        ),
        _fault(
            "validation_accepted",
            "/v1/completions accepts n > 1 with nvext.extra_fields [completion_token_ids] "
            "(200, n choices) instead of the 400",
        ),
        _fault(
            "invalid_json_body",
            "non-streaming chat completions answer 200 application/json with the body cut in half",
        ),
        _fault("request_id_not_echoed", "the client's x-request-id is never echoed on responses"),
        _fault(
            "stream_answered_unary",
            "stream: true is ignored on the OpenAI routes: one non-streamed JSON body answers",
        ),
        _fault("input_tokens_negative", "/v1/responses/input_tokens answers input_tokens -1"),
        _fault(
            "engine_data_ids_differ",
            "nvext.engine_data.completion_token_ids disagree with nvext.completion_token_ids "
            "(the last id is off by one)",
        ),
        _fault(
            "weight_version_misreported",
            "nvext.engine_data.weight_version names weights that were never applied",
        ),
        _fault(
            "silent_cancellation",
            "every choice reports finish_reason 'stop' while nvext.detailed_finish_reason says "
            "'cancelled' (Dynamo's mapping of an engine-side abort)",
        ),
        _fault("unknown_finish_reason", "finish_reason is 'weird_reason'"),
        _fault(
            "stream_truncated",
            "streams end after the first content chunk: no terminal chunk, no [DONE]",
        ),
        _fault("protocol_version_2", "/v1/rl/workers reports protocol_version 2", _RL_BACKENDS),
        _fault("worker_without_routes", "worker 0 has no 'routes' key", _RL_BACKENDS),
        _fault("duplicate_instance_ids", "worker 1 reuses worker 0's instance_id", _RL_BACKENDS),
        _fault(
            "request_plane_url_mismatch",
            "worker 0 says request_plane_url dyn://dynamo.backend.generate",
            _RL_BACKENDS,
        ),
        _fault("routes_unsorted", "workers list their routes in descending order", _RL_BACKENDS),
        _fault("routes_duplicated", "workers list their first route twice", _RL_BACKENDS),
        _fault(
            "probe_error_with_routes",
            "worker 0 carries an 'error' and still lists routes",
            _RL_BACKENDS,
        ),
        _fault("optional_field_null", "worker 0 has system_url: null", _RL_BACKENDS),
        _fault(
            "instance_id_rounded",
            "instance ids are written as JSON floats rounded to float64",
            _RL_BACKENDS,
        ),
        _fault(
            "worker_identity_unstable",
            "every read of /v1/rl/workers issues new instance ids",
            _RL_BACKENDS,
        ),
        _fault(
            "rl_listener_on_frontend",
            "the frontend port also serves GET /v1/rl/workers (the listener's body)",
            _RL_BACKENDS,
        ),
        _fault(
            "sglang_input_logprob_first_not_null",
            "SGLang input_token_logprobs[0] carries a number instead of null",
            _SGLANG,
        ),
        _fault(
            "native_route_sequence_differs",
            "SGLang's /generate serves another sequence than the OpenAI routes for the same "
            "prompt (ids, logprobs and text agree with each other)",
            _SGLANG,
        ),
        _fault(
            "token_ids_wrapped",
            "a prompt id outside the vocabulary (/v1/completions, SGLang's /generate input_ids) "
            "is reduced modulo the vocabulary and served instead of refused",
        ),
        _fault(
            "context_window_unchecked",
            "/v1/completions serves a prompt plus max_tokens beyond the context window instead "
            "of refusing it",
        ),
        _fault(
            "weight_versions_span_collapsed",
            "SGLang's meta_info.weight_versions names one span of the current version over every "
            "output token, also those generated before an update the request was paused across",
            _SGLANG,
        ),
        _fault(
            "sglang_output_logprob_id_mismatch",
            "SGLang output_token_logprobs[i][1] is output_ids[i] + 1",
            _SGLANG,
        ),
        # -- control plane: worker administration -------------------------------------------
        _fault(
            "admin_http200_failure_body",
            "weight updates from disk (and the sidecar's finish_weight_update) answer HTTP 200 "
            "with a failure body (status error / success false) even when paused; nothing loads",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "pause_not_applied",
            "pause is acknowledged (and updates accepted) but generation goes on: nothing is "
            "held, frozen or aborted",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "pause_reaches_first_worker_only",
            "a pause is acknowledged by every worker but applied by the deployment's first only: "
            "the others go on generating (a fan-out that stops at its first target)",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "distributed_update_without_group",
            "update_weights_from_distributed loads the weights and answers ok with no weight "
            "update group formed (before init_weights_update_group, after its destruction)",
            _RL_BACKENDS,
        ),
        _fault(
            "distributed_version_not_declared",
            "a distributed weight update loads the weights and answers ok but ignores the "
            "weight_version it names (the worker keeps reporting the old one)",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "distributed_update_fails_open",
            "a distributed weight update whose body the engine's schema refuses (a non-boolean "
            "flag, SGLang's required names missing) answers success and loads nothing",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "version_update_fails_open",
            "update_weight_version without new_version answers success and declares nothing",
            _SGLANG | _SIDECAR,
        ),
        _fault(
            "invalid_pause_mode_accepted",
            "pause_generation with a mode the engine does not have pauses in keep mode and "
            "answers ok",
            _RL_BACKENDS,
        ),
        _fault(
            "sglang_invalid_pause_mode_crashes",
            "pause_generation with a mode the engine does not have answers 200 ok, then the "
            "worker dies: its system server answers nothing more and it leaves routing",
            _SGLANG,
        ),
        _fault(
            "invalid_pause_mode_pauses",
            "pause_generation refuses a mode the engine does not have, yet pauses the worker",
            _RL_BACKENDS,
        ),
        _fault(
            "unpaused_update_applied",
            "update_weights_from_disk loads the weights on a worker that is not paused",
            _RL_BACKENDS,
        ),
        _fault(
            "abort_orphans_streams",
            "a stream whose request the worker aborts (a pause in abort mode) is left without a "
            "terminal: the connection closes after the tokens released, no terminal chunk, no "
            "[DONE] (vllm-project/tpu-inference #3362)",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "departed_worker_listed",
            "a worker whose process went away stays listed by /v1/rl/workers as healthy (its "
            "routes and system_url, no error)",
            _RL_BACKENDS,
            slow=True,
        ),
        _fault(
            "recovered_worker_keeps_version",
            "a worker whose engine died and was restarted on its starting weights still reports "
            "the version declared before the crash",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "crashed_stream_ends_clean",
            "a stream whose engine died under it ends with a terminal chunk (finish stop) and "
            "[DONE], as if it had finished",
        ),
        _fault(
            "migration_repeats_splice_token",
            "a stream moved to another worker when its worker's process died (--migration-limit) "
            "sends the last token before the splice again: one id, its text and its logprob "
            "twice",
        ),
        _fault(
            "metadata_upload_refusals_reworded",
            "the frontend refuses an nvext.metadata_upload it cannot read (Dynamo 1.7's forms) "
            "with serde's generic wording instead of the reason",
        ),
        _fault(
            "generation_artifact_limits_unchecked",
            "a generation-artifact metadata_upload with stop strings or several choices is not "
            "refused with 400 (it is answered as any artifact request is: 500)",
        ),
        _fault(
            "null_version_undeclared",
            'set_weight_version {"weight_version": null} declares nothing: the worker keeps '
            "reporting the version declared before it",
            _RL_BACKENDS,
        ),
        _fault(
            "unversioned_update_declares",
            "update_weights_from_disk without weight_version declares 'unknown': the worker "
            "reports it instead of the version declared before (its reply still says "
            "version_declared false)",
            _RL_BACKENDS,
        ),
        _fault(
            "probe_reply_unvalidated",
            "the RL listener lists a worker's route-probe reply as it came: no routes array, "
            "a non-string or empty route, an invalid world_size are listed without an error",
            _RL_BACKENDS,
        ),
        _fault(
            "probe_worker_error_replaced",
            "a worker's own probe error {status: error, message: M} is listed as 'worker routes "
            "request failed' instead of M",
            _RL_BACKENDS,
        ),
        _fault(
            "probe_deadline_ignored",
            "the RL listener waits for a worker that never answers its route probe past "
            "DYN_RL_REQUEST_TIMEOUT_SECS: the whole read hangs",
            _RL_BACKENDS,
            slow=True,
        ),
        _fault(
            "probe_timeout_fails_all",
            "one route probe past its deadline lists every worker with the timeout error",
            _RL_BACKENDS,
        ),
        _fault(
            "stopped_worker_listed",
            "a paused or released SGLang worker stays listed for routing: the frontend's /health "
            "keeps its generate instance (ai-dynamo/dynamo PR #15078)",
            _SGLANG,
            slow=True,
        ),
        _fault(
            "second_pause_hangs",
            "a pause_generation sent while the worker is paused is answered only after another "
            "caller resumes it (FastDeploy #7825)",
            _RL_BACKENDS,
            slow=True,
        ),
        _fault(
            "pause_mode_ignored",
            "pause_generation accepts abort and wait, and answers naming them, but applies keep: "
            "requests in flight freeze until the resume instead of ending or finishing (the mode "
            "never reaches the engine, as a Ray Serve wrapper review found)",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "wait_answers_early",
            "a wait pause answers at once with the streams in flight frozen mid-way; they finish "
            "only after the resume, under the weights loaded meanwhile",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "in_place_pause_aborts",
            "SGLang's in_place pause aborts the requests in flight instead of holding them until "
            "continue_generation",
            _SGLANG,
        ),
        _fault(
            "sglang_second_pause_fails",
            "a pause_generation sent while the worker is paused answers HTTP 500 (the real "
            "Dynamo 1.6.1 SGLang worker with file discovery cannot leave discovery twice)",
            _SGLANG,
        ),
        _fault(
            "retract_pause_aborts",
            "SGLang's retract pause aborts the requests in flight instead of returning them to "
            "the waiting queue to continue after continue_generation",
            _SGLANG,
        ),
        _fault(
            "pause_counted_per_caller",
            "pauses are counted: a worker paused twice holds generation until it is resumed twice",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "pause_counted_past_first_worker",
            "pauses are counted on every worker but the deployment's first: paused twice, they "
            "hold generation until resumed twice (a fault a suite judging one worker misses)",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "resume_slow",
            "a resume answers ok, but new generation stays held for 3.5 s after it",
            _ADMIN_BACKENDS,
            slow=True,
        ),
        _fault(
            "admits_after_pause",
            "a request that arrives once a pause answered is admitted and generates: an abort or "
            "wait pause gates only what it found in flight (vllm-project/vllm #33926, #51476); "
            "a keep pause still freezes it before its first token",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "weight_version_unchanged",
            "weight updates answer ok with the new version but the worker keeps the old one",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "update_keeps_old_weights",
            "weight updates answer ok and change the version, but tokens come from the old weights",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "update_serves_a_mix",
            "weight updates answer ok and change the version, but the worker then serves "
            "weights that are neither the old nor the new checkpoint (a partial load): the "
            "output changes, the policy is not the checkpoint sent",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "update_applied_once",
            "a worker's first weight update swaps its weights; every later one answers ok and "
            "declares its version but keeps the weights of the first (a refit path that works "
            "once)",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "version_stuck_after_first",
            "a worker reports the first weight version it declared after every later update "
            "(the weights do change)",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "flush_works_once",
            "a worker's prefix cache is cleared by the first flush a route asks for (the flush "
            "route, a pause with clear_cache) only; later ones answer ok and keep it (the cache "
            "survives the next refits: NeMo RL #4018)",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "kv_not_flushed",
            "cache flushes and weight updates answer ok but the prefix cache is kept "
            "(cached_tokens unchanged)",
            _ADMIN_BACKENDS,
        ),
        _fault(
            "sidecar_status_words",
            'the native sidecar\'s pause and resume answer {"status": "ok"} instead of '
            'vLLM\'s "paused" / "resumed"',
            _SIDECAR,
        ),
        _fault(
            "sidecar_pause_default_keep",
            "the native sidecar's pause without a mode keeps requests in place (the Python "
            "worker's default) instead of aborting them (vLLM's default)",
            _SIDECAR,
        ),
        _fault(
            "sidecar_partial_transfer_routes",
            "sidecar worker 0 lists the weight-transfer routes without "
            "update/finish_weight_update (it still serves it)",
            _SIDECAR,
        ),
        _fault(
            "unknown_route_200",
            'an unknown /engine/<route> answers HTTP 200 {"status": "ok"} instead of the 404',
            _ADMIN_BACKENDS,
        ),
        # -- control plane: discovery ---------------------------------------------------------
        _fault(
            "namespace_prefix_matches_ns2",
            "DYN_NAMESPACE_PREFIX matching ignores the '-' boundary: prefix ns also lists ns2",
            _RL_BACKENDS,
        ),
        _fault(
            "empty_prefix_global",
            "an empty DYN_NAMESPACE_PREFIX is read as every namespace instead of as absent",
            _RL_BACKENDS,
        ),
        _fault("system_url_absent", "vLLM worker 0 is listed without system_url", _RL_BACKENDS),
        _fault(
            "rl_listener_gateway_body",
            "GET /v1/rl/workers answers the SGLang Model Gateway's body (protocol_version 1, "
            "workers with id/url/engine, a total) instead of Dynamo's",
            _RL_BACKENDS,
        ),
        _fault(
            "routes_renamed",
            "worker 0 advertises its routes prefixed with 'engine/' while serving the "
            "unprefixed names",
            _RL_BACKENDS,
        ),
        _fault(
            "required_route_missing",
            "worker 0 does not advertise update_weights_from_disk (it still serves it)",
            _RL_BACKENDS,
        ),
        # -- control plane: requests and telemetry ---------------------------------------------
        _fault(
            "cancellation_not_propagated",
            "a client disconnect is ignored: generation runs to the end, the ledger says completed",
        ),
        _fault(
            "late_response_delivered_twice",
            "a retry reusing the x-request-id of a still-running attempt is answered with that "
            "attempt's response; both attempts complete",
        ),
        _fault(
            "metrics_high_cardinality",
            "/metrics labels dynamo_frontend_requests_total with each request's id",
        ),
        _fault(
            "matched_stop_id_dropped",
            "a choice that ends on a stop id or EOS loses that id from its sequence (ids, "
            "logprobs and usage still agree: ai-dynamo/dynamo #14302)",
        ),
        _fault(
            "abort_reported_as_stop",
            "an aborted request's nvext.detailed_finish_reason says stop, as its finish_reason "
            "does: a truncated rollout looks finished (ai-dynamo/dynamo #14418)",
        ),
        _fault(
            "crossed_stream_length_short",
            "a request an abort cut short (a pause in abort mode, a rename that aborts) reports "
            "finish_reason length, and detailed_finish_reason length, with fewer than max_tokens "
            "ids (SkyRL #1250: an abort that looks like a finished rollout)",
        ),
        _fault(
            "crossed_stream_raw_abort",
            "a request an abort cut short reports the engine's raw finish_reason 'abort' "
            "(vLLM's FinishReason.ABORT) instead of Dynamo's 'stop'",
        ),
        _fault(
            "length_reported_as_stop",
            "a choice that reaches max_tokens reports finish_reason stop",
        ),
        _fault(
            "metrics_rl_attempt_label",
            "/metrics labels dynamo_frontend_requests_total with each request's X-RL-Attempt-ID",
        ),
        _fault(
            "trace_stream_headers_dropped",
            "the request trace's payload rows of streamed chat requests carry no captured headers",
            slow=True,
        ),
        _fault(
            "trace_stream_end_missing",
            "streamed requests get no request_end row in the request trace",
        ),
    ),
)

FAULTS: Mapping[str, Fault] = CATALOGUE.by_name
FAULT_NAMES: tuple[str, ...] = CATALOGUE.names
catalogue_lines = CATALOGUE.lines


def active_faults(names: Iterable[str] = ()) -> ActiveFaults:
    """The deployment faults switched on (validated)."""
    return ActiveFaults(CATALOGUE, names)
