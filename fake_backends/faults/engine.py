"""Engine-level faults for the toy Dynamo worker (``--engine-fault NAME``).

Why a second catalogue: ``fake_backends.faults.deployment`` breaks the contract in our *fake
frontend*.
These faults break it one layer lower, in what a real Dynamo backend worker yields to the REAL
Dynamo frontend, so the suite can see what the real frontend does with a misbehaving engine:
reject the request, repair the deviation, or pass it through to the client.  Each fault is
one small deviation an engine could plausibly make, applied deterministically to every
request it applies to (``applies_to`` names the request surfaces: ``openai`` = the canonical token
stream behind /v1/completions, /v1/chat/completions and /inference/v1/generate, ``sglang``
= the native SGLang /generate stream, ``admin`` = the RL routes on the system server).

``observed`` records what the real Dynamo 1.6.1 frontend did with the fault (measured by
``tests/dynamo/test_dynamo_engine_faults.py``): that is the pass-through report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fake_backends.faults.catalogue import ActiveFaults, Catalogue, Fault
from fake_backends.faults.deployment import FAULT_NAMES as DEPLOYMENT_FAULT_NAMES

OPENAI = "openai"
SGLANG = "sglang"
ADMIN = "admin"


def _fault(name: str, description: str, surfaces: Iterable[str], observed: str) -> Fault:
    return Fault(name, description, frozenset(surfaces), observed)


ENGINE_CATALOGUE = Catalogue(
    "engine fault",
    (
        _fault(
            "logprobs_misaligned",
            "chunks carry up to 3 tokens but only the first token's log_probs/top_logprobs",
            [OPENAI],
            "PASSED THROUGH on completions (6 tokens, 2 token_logprobs) and chat (one content "
            "entry per chunk); REJECTED on /inference/v1/generate (500 internal_error)",
        ),
        _fault(
            "selected_logprobs_one_short",
            "the last token of each choice comes without log_probs/top_logprobs (n ids, n-1 "
            "logprobs); SGLang output_token_logprobs lose their last triple",
            [OPENAI, SGLANG],
            "PASSED THROUGH on completions/chat (n tokens, n-1 token_logprobs; the last "
            "stream chunk has token_logprobs []) and SGLang /generate; REJECTED on "
            "/inference/v1/generate (500)",
        ),
        _fault(
            "prompt_logprobs_shifted_by_one",
            "prompt logprob entries move one position right: [null, null, e1, ..., e(m-2)] "
            "(SGLang: input_token_logprobs values likewise)",
            [OPENAI, SGLANG],
            "PASSED THROUGH everywhere: nvext.prompt_logprobs, chat top-level "
            "prompt_logprobs, /inference/v1/generate prompt_logprobs, SGLang "
            "input_token_logprobs",
        ),
        _fault(
            "prompt_logprobs_int_keys",
            "engine_data.prompt_logprobs positions are keyed by integer token ids, not strings",
            [OPENAI],
            "REJECTED: 500 'Internal server error' for the whole request (completions, chat, "
            "/inference/v1/generate); streams: 200, then an error event and [DONE]; requests "
            "without prompt logprobs are unaffected",
        ),
        _fault(
            "unknown_finish_reason",
            "finish_reason is 'weird_reason' (SGLang: {'type': 'weird_reason'})",
            [OPENAI, SGLANG],
            "REJECTED: 500 (completions, chat, /inference/v1/generate); streams: 200, the "
            "last token lost, an error event, [DONE]; SGLang /generate: PASSED THROUGH "
            "verbatim",
        ),
        _fault(
            "cancelled_finish",
            "every choice stops after max(1, max_tokens // 2) tokens with finish_reason "
            "'cancelled' (SGLang: {'type': 'abort'}), as if aborted",
            [OPENAI, SGLANG],
            "REPAIRED into a normal stop: finish_reason 'stop', only "
            "nvext.detailed_finish_reason says 'cancelled'; /inference/v1/generate answers "
            "499 request_cancelled; SGLang /generate passes {'type': 'abort'}",
        ),
        _fault(
            "abort_finish",
            "every choice stops after max(1, max_tokens // 2) tokens with the raw vLLM "
            "finish_reason 'abort' (not normalized to 'cancelled')",
            [OPENAI],
            "REPAIRED: normalized to cancelled (finish_reason 'stop', detailed_finish_reason "
            "'cancelled'); /inference/v1/generate answers 499 request_cancelled",
        ),
        _fault(
            "eos_as_stop",
            "an EOS ends a choice with finish_reason 'stop' and no stop_reason, instead of 'eos' "
            "with stop_reason EOS (it is how vLLM itself reports EOS)",
            [OPENAI],
            "INDISTINGUISHABLE but for nvext.stop_reason being absent: an honest 'eos' also "
            "shows finish_reason 'stop' and detailed_finish_reason 'stop' in 1.6.1",
        ),
        _fault(
            "usage_lies",
            "completion_usage adds 1000 to prompt_tokens and 2000 to completion_tokens "
            "(SGLang meta_info likewise)",
            [OPENAI, SGLANG],
            "prompt_tokens PASSED THROUGH (1004), completion_tokens REPAIRED (recounted by "
            "the frontend), total_tokens their sum; SGLang meta_info PASSED THROUGH",
        ),
        _fault(
            "worker_text_field",
            "every chunk sets text '<worker-text>' next to its token_ids",
            [OPENAI],
            "PASSED THROUGH: the text is the worker's and the logprobs become empty "
            "(completions tokens [], chat content []); /inference/v1/generate ignores text",
        ),
        _fault(
            "wrong_top_logprob_token",
            "top_logprobs entries carry token '<T{id}>', which does not match their token_id",
            [OPENAI],
            "PASSED THROUGH: chat top_logprobs show the worker's text and bytes; completions "
            "top_logprobs gain the worker's key next to the frontend's own decoding",
        ),
        _fault(
            "completion_ids_retokenized",
            "engine_data.completion_token_ids are a byte-level re-tokenization of the "
            "generated text, not the sampled ids",
            [OPENAI],
            "PASSED THROUGH in nvext.engine_data.completion_token_ids "
            "(nvext.completion_token_ids stay the sampled ids)",
        ),
        _fault(
            "weight_version_unchanged",
            "weight updates and set_weight_version answer ok but the reported version never "
            "changes",
            [ADMIN],
            "not visible to the frontend: admin calls go straight to the worker's system "
            "server, which answers 200 ok",
        ),
        _fault(
            "update_keeps_old_weights",
            "weight updates answer ok (and record the version) but generation keeps the old "
            "weights",
            [ADMIN],
            "not visible to the frontend: admin calls go straight to the worker's system "
            "server, which answers 200 ok",
        ),
        _fault(
            "kv_not_flushed",
            "flush_cache answers ok but cached prefixes are still reused",
            [ADMIN],
            "not visible to the frontend: admin calls go straight to the worker's system "
            "server; the frontend passes the worker's usage.prompt_tokens_details through",
        ),
        _fault(
            "admin_http200_failure_body",
            "update_weights_from_disk answers HTTP 200 with a failure body (status error) even "
            "when paused; nothing loads",
            [ADMIN],
            "not visible to the frontend: the worker's system server passes the handler's "
            'reply on as HTTP 200 {"status": "error"}',
        ),
        _fault(
            "pause_not_applied",
            "pause_generation answers ok but requests keep generating",
            [ADMIN],
            "not visible to the frontend: admin calls go straight to the worker's system "
            "server, which answers 200 ok",
        ),
        _fault(
            "invalid_pause_mode_accepted",
            "pause_generation with a mode the engine does not have pauses in keep mode and "
            "answers ok",
            [ADMIN],
            "the worker's system server passes the handler's 200 ok on",
        ),
        _fault(
            "invalid_pause_mode_pauses",
            "pause_generation refuses a mode the engine does not have, yet pauses the engine",
            [ADMIN],
            'the system server answers 200 {"status": "error"}; generations are then held',
        ),
        _fault(
            "unpaused_update_applied",
            "update_weights_from_disk loads the weights on an engine that is not paused",
            [ADMIN],
            "the system server passes the handler's 200 ok on",
        ),
        _fault(
            "null_version_undeclared",
            'set_weight_version {"weight_version": null} declares nothing: the worker keeps '
            "reporting the version declared before it",
            [ADMIN],
            "the system server passes the handler's 200 ok on; get_weight_version keeps the "
            "previous version",
        ),
        _fault(
            "unversioned_update_declares",
            "update_weights_from_disk without weight_version declares 'unknown' (its reply "
            "still says version_declared false)",
            [ADMIN],
            "the system server passes the handler's 200 ok on; get_weight_version reports "
            "'unknown'",
        ),
        _fault(
            "second_pause_hangs",
            "a pause_generation sent while the engine is paused is answered only after another "
            "caller resumes it",
            [ADMIN],
            "the system server holds the call open until the engine is resumed",
        ),
        _fault(
            "stopped_worker_listed",
            "with SGLang administration, a paused or released engine keeps its generate "
            "instance in discovery (ai-dynamo/dynamo PR #15078: paused workers still routed to)",
            [ADMIN],
            "the frontend's /health keeps listing the instance and routes to it",
        ),
    ),
    # The toy engine's worker shares the runtime and the system server's routes with the fake
    # deployment, which ask about the deployment's faults too: off behind the real frontend.
    foreign=DEPLOYMENT_FAULT_NAMES,
)

ENGINE_FAULTS: Mapping[str, Fault] = ENGINE_CATALOGUE.by_name
ENGINE_FAULT_NAMES: tuple[str, ...] = ENGINE_CATALOGUE.names
catalogue_lines = ENGINE_CATALOGUE.lines


def engine_faults(names: Iterable[str] = ()) -> ActiveFaults:
    """The engine faults switched on for one worker process (validated)."""
    return ActiveFaults(ENGINE_CATALOGUE, names)


SGLANG_FAMILY_FAULTS = frozenset({"stopped_worker_listed"})
"""Faults of the toy worker's SGLang administration family (`--admin-family sglang`)."""


def toy_engine_for(fault: str) -> str:
    """The toy engine (`--launch dynamo-<engine>`) on which an engine fault shows."""
    return "fake-sglang" if fault in SGLANG_FAMILY_FAULTS else "fake-vllm"
