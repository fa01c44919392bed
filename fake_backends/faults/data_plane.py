"""The first half of the fake deployment's fault catalogue: what an answer gets wrong (token ids,
logprobs, terminal states, stream framing, the native routes, the worker list's fields)."""

from __future__ import annotations

from fake_backends.faults.catalogue import Fault
from fake_backends.faults.kinds import (
    PROMPT_LOGPROB_BACKENDS,
    RL_BACKENDS,
    SGLANG,
    fault,
)

DATA_PLANE_FAULTS: tuple[Fault, ...] = (
    fault(
        "prompt_logprobs_shifted_by_one",
        "prompt logprob entries move one position right: [null, null, e1, ..., e(m-2)]",
        PROMPT_LOGPROB_BACKENDS,
    ),
    fault(
        "prompt_logprobs_leading_null_dropped",
        "prompt logprobs lose the undefined first position: [e1, ..., e(m-1)], length m-1",
        PROMPT_LOGPROB_BACKENDS,
    ),
    fault(
        "selected_logprobs_one_short",
        "selected-token logprob arrays lose their last entry (n ids, n-1 logprobs)",
    ),
    fault("logprobs_reordered", "selected-token logprob arrays are reversed"),
    fault(
        "logprobs_absent",
        "logprobs requested are not returned: completions choices lack the 'logprobs' key, "
        "chat choices have logprobs null (streams too)",
    ),
    fault(
        "completion_ids_retokenized",
        "nvext.completion_token_ids are a byte-level re-tokenization of the generated text",
    ),
    fault(
        "prompt_ids_with_unsent_bos",
        "nvext.prompt_token_ids gain a BOS (id 1) that was never sent to the engine",
    ),
    fault("completion_ids_missing", "nvext.completion_token_ids are never emitted"),
    fault(
        "prompt_ids_missing",
        "nvext.prompt_token_ids are never emitted, even when selected "
        "(completion_token_ids still are)",
    ),
    fault("wrong_choice_count", "responses carry one more choice than requested"),
    fault("positive_logprob", "the first selected logprob is +0.5"),
    fault("nan_logprob", "the first selected logprob is NaN (bare JSON token NaN)"),
    fault(
        "topk_missing_selected",
        "top logprobs never include the sampled token (k-1 others when it was in the top-k)",
    ),
    fault(
        "stop_reason_in_choices",
        "completions choices carry stop_reason (as vLLM's own server does) whether or not "
        "nvext.extra_fields asked for it; Dynamo reports it only as nvext.stop_reason",
    ),
    fault(
        "finish_reason_missing",
        "the terminal chunk / non-stream choice has finish_reason null",
    ),
    fault("double_terminal", "the terminal chunk of each choice is sent twice"),
    fault("done_missing", "streams end without data: [DONE]"),
    fault(
        "content_after_terminal",
        "one more text chunk is sent for a choice after its terminal chunk",
    ),
    fault(
        "usage_counts_wrong",
        "usage.completion_tokens is one too high (total_tokens consistent with it)",
    ),
    fault(
        "usage_chunk_miscounts",
        "a stream's usage chunk (stream_options.include_usage) counts one completion token "
        "more than the stream carried (total_tokens consistent with it); unary usage is right",
    ),
    fault(
        "chat_top_logprobs_short",
        "chat top_logprobs lists lose their last entry: k-1 alternatives for top_logprobs k",
    ),
    fault(
        "stream_index_swapped",
        "a stream with n > 1 choices sends choice 0's chunks under index 1 and choice 1's "
        "under index 0",
    ),
    fault(
        "stop_string_drops_last_id",
        "a choice that ends on a stop string loses the token that completed it from its ids, "
        "logprobs and usage (its text, cut before the stop string, is kept)",
    ),
    fault(
        "model_identity_mismatch",
        "responses name model 'other-model' while /v1/models lists the served one",
    ),
    fault(
        "stream_ids_differ",
        "in streams, the last chunk's completion token ids are dropped",
    ),
    fault(
        "text_prompt_differs",
        "a string prompt gets an unreported BOS prepended, so text and token prompts differ",
    ),
    fault(
        "validation_accepted",
        "/v1/completions accepts n > 1 with nvext.extra_fields [completion_token_ids] "
        "(200, n choices) instead of the 400",
    ),
    fault(
        "invalid_json_body",
        "non-streaming chat completions answer 200 application/json with the body cut in half",
    ),
    fault("request_id_not_echoed", "the client's x-request-id is never echoed on responses"),
    fault(
        "stream_answered_unary",
        "stream: true is ignored on the OpenAI routes: one non-streamed JSON body answers",
    ),
    fault("input_tokens_negative", "/v1/responses/input_tokens answers input_tokens -1"),
    fault(
        "engine_data_ids_differ",
        "nvext.engine_data.completion_token_ids disagree with nvext.completion_token_ids "
        "(the last id is off by one)",
    ),
    fault(
        "weight_version_misreported",
        "nvext.engine_data.weight_version names weights that were never applied",
    ),
    fault(
        "silent_cancellation",
        "every choice reports finish_reason 'stop' while nvext.detailed_finish_reason says "
        "'cancelled' (Dynamo's mapping of an engine-side abort)",
    ),
    fault("unknown_finish_reason", "finish_reason is 'weird_reason'"),
    fault(
        "stream_truncated",
        "streams end after the first content chunk: no terminal chunk, no [DONE]",
    ),
    fault("protocol_version_2", "/v1/rl/workers reports protocol_version 2", RL_BACKENDS),
    fault("worker_without_routes", "worker 0 has no 'routes' key", RL_BACKENDS),
    fault("duplicate_instance_ids", "worker 1 reuses worker 0's instance_id", RL_BACKENDS),
    fault(
        "request_plane_url_mismatch",
        "worker 0 says request_plane_url dyn://dynamo.backend.generate",
        RL_BACKENDS,
    ),
    fault("routes_unsorted", "workers list their routes in descending order", RL_BACKENDS),
    fault("routes_duplicated", "workers list their first route twice", RL_BACKENDS),
    fault(
        "probe_error_with_routes",
        "worker 0 carries an 'error' and still lists routes",
        RL_BACKENDS,
    ),
    fault("optional_field_null", "worker 0 has system_url: null", RL_BACKENDS),
    fault(
        "instance_id_rounded",
        "instance ids are written as JSON floats rounded to float64",
        RL_BACKENDS,
    ),
    fault(
        "worker_identity_unstable",
        "every read of /v1/rl/workers issues new instance ids",
        RL_BACKENDS,
    ),
    fault(
        "rl_listener_on_frontend",
        "the frontend port also serves GET /v1/rl/workers (the listener's body)",
        RL_BACKENDS,
    ),
    fault(
        "sglang_input_logprob_first_not_null",
        "SGLang input_token_logprobs[0] carries a number instead of null",
        SGLANG,
    ),
    fault(
        "native_route_sequence_differs",
        "SGLang's /generate serves another sequence than the OpenAI routes for the same "
        "prompt (ids, logprobs and text agree with each other)",
        SGLANG,
    ),
    fault(
        "token_ids_wrapped",
        "a prompt id outside the vocabulary (/v1/completions, SGLang's /generate input_ids) "
        "is reduced modulo the vocabulary and served instead of refused",
    ),
    fault(
        "context_window_unchecked",
        "/v1/completions serves a prompt plus max_tokens beyond the context window instead "
        "of refusing it",
    ),
    fault(
        "weight_versions_span_collapsed",
        "SGLang's meta_info.weight_versions names one span of the current version over every "
        "output token, also those generated before an update the request was paused across",
        SGLANG,
    ),
    fault(
        "rename_misses_token_record",
        "update_weight_version renames what the worker reports, but SGLang's per-token record "
        "(meta_info.weight_versions) keeps the version it had, as Dynamo's route reaching only "
        "the tokenizer manager does",
        SGLANG,
    ),
    fault(
        "paused_rename_restamps_tokens",
        "a version renamed (update_weight_version) while a request was paused is stamped on "
        "every token of it, also those made before the pause: SGLang's meta_info.weight_versions "
        "names the version at completion instead of at generation",
        SGLANG,
    ),
    fault(
        "sglang_output_logprob_id_mismatch",
        "SGLang output_token_logprobs[i][1] is output_ids[i] + 1",
        SGLANG,
    ),
)
