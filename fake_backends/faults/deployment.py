"""The catalogue of named contract violations and the set that is switched on.

Why faults: a conformance suite is only trustworthy if each of its checks has been seen
to fail.  Every fault breaks exactly one rule of the contract, deterministically, on every
request it applies to, so a test can switch it on and expect a specific check to fire.
Code consults the active set with ``faults.active("name")``; asking for a name that is
not in the catalogue is a programming error and raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

ALL_BACKENDS = frozenset({"vllm", "sglang", "trtllm"})
_PROMPT_LOGPROB_BACKENDS = frozenset({"vllm", "sglang"})
_RL_BACKENDS = frozenset({"vllm"})
_SGLANG = frozenset({"sglang"})
_ADMIN_BACKENDS = frozenset({"vllm", "sglang"})  # workers with a system server


@dataclass(frozen=True)
class Fault:
    """One named way of breaking the contract."""

    name: str
    description: str
    backends: frozenset[str] = ALL_BACKENDS  # where it can manifest; a no-op elsewhere


_CATALOGUE: tuple[Fault, ...] = (
    Fault(
        "prompt_logprobs_shifted_by_one",
        "prompt logprob entries move one position right: [null, null, e1, ..., e(m-2)]",
        _PROMPT_LOGPROB_BACKENDS,
    ),
    Fault(
        "prompt_logprobs_leading_null_dropped",
        "prompt logprobs lose the undefined first position: [e1, ..., e(m-1)], length m-1",
        _PROMPT_LOGPROB_BACKENDS,
    ),
    Fault(
        "selected_logprobs_one_short",
        "selected-token logprob arrays lose their last entry (n ids, n-1 logprobs)",
    ),
    Fault("logprobs_reordered", "selected-token logprob arrays are reversed"),
    Fault(
        "logprobs_absent",
        "logprobs requested are not returned: completions choices lack the 'logprobs' key, "
        "chat choices have logprobs null (streams too)",
    ),
    Fault(
        "completion_ids_retokenized",
        "nvext.completion_token_ids are a byte-level re-tokenization of the generated text",
    ),
    Fault(
        "prompt_ids_with_unsent_bos",
        "nvext.prompt_token_ids gain a BOS (id 1) that was never sent to the engine",
    ),
    Fault("completion_ids_missing", "nvext.completion_token_ids are never emitted"),
    Fault(
        "prompt_ids_missing",
        "nvext.prompt_token_ids are never emitted, even when selected "
        "(completion_token_ids still are)",
    ),
    Fault("wrong_choice_count", "responses carry one more choice than requested"),
    Fault("positive_logprob", "the first selected logprob is +0.5"),
    Fault("nan_logprob", "the first selected logprob is NaN (bare JSON token NaN)"),
    Fault(
        "topk_missing_selected",
        "top logprobs never include the sampled token (k-1 others when it was in the top-k)",
    ),
    Fault(
        "finish_reason_missing",
        "the terminal chunk / non-stream choice has finish_reason null",
    ),
    Fault("double_terminal", "the terminal chunk of each choice is sent twice"),
    Fault("done_missing", "streams end without data: [DONE]"),
    Fault(
        "content_after_terminal",
        "one more text chunk is sent for a choice after its terminal chunk",
    ),
    Fault(
        "usage_counts_wrong",
        "usage.completion_tokens is one too high (total_tokens consistent with it)",
    ),
    Fault(
        "model_identity_mismatch",
        "responses name model 'other-model' while /v1/models lists the served one",
    ),
    Fault(
        "stream_ids_differ",
        "in streams, the last chunk's completion token ids are dropped",
    ),
    Fault(
        "text_prompt_differs",
        "a string prompt gets an unreported BOS prepended, so text and token prompts differ",
    ),
    Fault(
        "validation_accepted",
        "/v1/completions accepts n > 1 with nvext.extra_fields [completion_token_ids] "
        "(200, n choices) instead of the 400",
    ),
    Fault(
        "invalid_json_body",
        "non-streaming chat completions answer 200 application/json with the body cut in half",
    ),
    Fault("request_id_not_echoed", "the client's x-request-id is never echoed on responses"),
    Fault(
        "stream_answered_unary",
        "stream: true is ignored on the OpenAI routes: one non-streamed JSON body answers",
    ),
    Fault("input_tokens_negative", "/v1/responses/input_tokens answers input_tokens -1"),
    Fault(
        "engine_data_ids_differ",
        "nvext.engine_data.completion_token_ids disagree with nvext.completion_token_ids "
        "(the last id is off by one)",
    ),
    Fault(
        "weight_version_misreported",
        "nvext.engine_data.weight_version names weights that were never applied",
    ),
    Fault(
        "silent_cancellation",
        "every choice reports finish_reason 'stop' while nvext.detailed_finish_reason says "
        "'cancelled' (Dynamo's mapping of an engine-side abort)",
    ),
    Fault("unknown_finish_reason", "finish_reason is 'weird_reason'"),
    Fault(
        "stream_truncated",
        "streams end after the first content chunk: no terminal chunk, no [DONE]",
    ),
    Fault("protocol_version_2", "/v1/rl/workers reports protocol_version 2", _RL_BACKENDS),
    Fault("worker_without_routes", "worker 0 has no 'routes' key", _RL_BACKENDS),
    Fault("duplicate_instance_ids", "worker 1 reuses worker 0's instance_id", _RL_BACKENDS),
    Fault(
        "request_plane_url_mismatch",
        "worker 0 says request_plane_url dyn://dynamo.backend.generate",
        _RL_BACKENDS,
    ),
    Fault("routes_unsorted", "workers list their routes in descending order", _RL_BACKENDS),
    Fault("routes_duplicated", "workers list their first route twice", _RL_BACKENDS),
    Fault(
        "probe_error_with_routes",
        "worker 0 carries an 'error' and still lists routes",
        _RL_BACKENDS,
    ),
    Fault("optional_field_null", "worker 0 has system_url: null", _RL_BACKENDS),
    Fault(
        "instance_id_rounded",
        "instance ids are written as JSON floats rounded to float64",
        _RL_BACKENDS,
    ),
    Fault(
        "worker_identity_unstable",
        "every read of /v1/rl/workers issues new instance ids",
        _RL_BACKENDS,
    ),
    Fault(
        "rl_listener_on_frontend",
        "the frontend port also serves GET /v1/rl/workers (the listener's body)",
        _RL_BACKENDS,
    ),
    Fault(
        "sglang_input_logprob_first_not_null",
        "SGLang input_token_logprobs[0] carries a number instead of null",
        _SGLANG,
    ),
    Fault(
        "sglang_output_logprob_id_mismatch",
        "SGLang output_token_logprobs[i][1] is output_ids[i] + 1",
        _SGLANG,
    ),
    # -- control plane: worker administration -------------------------------------------
    Fault(
        "admin_http200_failure_body",
        "weight updates from disk (and the sidecar's finish_weight_update) answer HTTP 200 "
        "with a failure body (status error / success false) even when paused; nothing loads",
        _ADMIN_BACKENDS,
    ),
    Fault(
        "pause_not_applied",
        "pause is acknowledged (and updates accepted) but generation goes on: nothing is "
        "held, frozen or aborted",
        _ADMIN_BACKENDS,
    ),
    Fault(
        "weight_version_unchanged",
        "weight updates answer ok with the new version but the worker keeps the old one",
        _ADMIN_BACKENDS,
    ),
    Fault(
        "update_keeps_old_weights",
        "weight updates answer ok and change the version, but tokens come from the old weights",
        _ADMIN_BACKENDS,
    ),
    Fault(
        "kv_not_flushed",
        "cache flushes and weight updates answer ok but the prefix cache is kept "
        "(cached_tokens unchanged)",
        _ADMIN_BACKENDS,
    ),
    Fault(
        "unknown_route_200",
        'an unknown /engine/<route> answers HTTP 200 {"status": "ok"} instead of the 404',
        _ADMIN_BACKENDS,
    ),
    # -- control plane: discovery ---------------------------------------------------------
    Fault(
        "namespace_prefix_matches_ns2",
        "DYN_NAMESPACE_PREFIX matching ignores the '-' boundary: prefix ns also lists ns2",
        _RL_BACKENDS,
    ),
    Fault(
        "empty_prefix_global",
        "an empty DYN_NAMESPACE_PREFIX is read as every namespace instead of as absent",
        _RL_BACKENDS,
    ),
    Fault("system_url_absent", "vLLM worker 0 is listed without system_url", _RL_BACKENDS),
    Fault(
        "routes_renamed",
        "worker 0 advertises its routes prefixed with 'engine/' while serving the unprefixed names",
        _RL_BACKENDS,
    ),
    Fault(
        "required_route_missing",
        "worker 0 does not advertise update_weights_from_disk (it still serves it)",
        _RL_BACKENDS,
    ),
    # -- control plane: requests and telemetry ---------------------------------------------
    Fault(
        "cancellation_not_propagated",
        "a client disconnect is ignored: generation runs to the end, the ledger says completed",
    ),
    Fault(
        "late_response_delivered_twice",
        "a retry reusing the x-request-id of a still-running attempt is answered with that "
        "attempt's response; both attempts complete",
    ),
    Fault(
        "metrics_high_cardinality",
        "/metrics labels dynamo_frontend_requests_total with each request's id",
    ),
)

FAULTS: Mapping[str, Fault] = MappingProxyType({f.name: f for f in _CATALOGUE})
FAULT_NAMES: tuple[str, ...] = tuple(f.name for f in _CATALOGUE)


class UnknownFaultError(ValueError):
    """Raised for fault names that are not in the catalogue; the message lists them all."""

    def __init__(self, unknown: Iterable[str]) -> None:
        self.unknown = tuple(unknown)
        super().__init__(
            f"unknown fault(s): {', '.join(self.unknown)}; "
            f"valid faults are: {', '.join(FAULT_NAMES)}"
        )


def validate_fault_names(names: Iterable[str]) -> tuple[str, ...]:
    """Return the names sorted and de-duplicated, or raise ``UnknownFaultError``."""
    wanted = list(names)
    unknown = [n for n in wanted if n not in FAULTS]
    if unknown:
        raise UnknownFaultError(unknown)
    return tuple(sorted(set(wanted)))


class ActiveFaults:
    """The faults currently switched on; safe to replace from another thread."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._active: frozenset[str] = frozenset(validate_fault_names(names))

    def active(self, name: str) -> bool:
        if name not in FAULTS:
            raise KeyError(f"no fault named {name!r} in the catalogue")
        return name in self._active

    def set(self, names: Iterable[str]) -> tuple[str, ...]:
        """Replace the active set (validated as a whole: nothing changes on error)."""
        valid = validate_fault_names(names)
        self._active = frozenset(valid)
        return valid

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._active))


def catalogue_lines() -> list[str]:
    """``NAME<TAB>description`` lines, as printed by ``--list-faults``."""
    return [f"{f.name}\t{f.description}" for f in _CATALOGUE]
