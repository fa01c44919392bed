"""Engine-level faults for the toy Dynamo worker (``--engine-fault NAME``).

Why a second catalogue: ``fake_backends.faults.deployment`` breaks the contract in our *fake
frontend*.
These faults break it one layer lower, in what a real Dynamo backend worker yields to the REAL
Dynamo frontend, so the suite can see what the real frontend does with a misbehaving engine:
reject the request, repair the deviation, or pass it through to the client.  Each fault is
one small deviation an engine could plausibly make, applied deterministically to every
request it applies to (``surfaces`` says which requests: ``openai`` = the canonical token
stream behind /v1/completions, /v1/chat/completions and /inference/v1/generate, ``sglang``
= the native SGLang /generate stream, ``admin`` = the RL routes on the system server).

``observed`` records what the real Dynamo 1.6.1 frontend did with the fault (measured by
``tests/dynamo/test_dynamo_engine_faults.py``): that is the pass-through report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

OPENAI = "openai"
SGLANG = "sglang"
ADMIN = "admin"


@dataclass(frozen=True)
class EngineFault:
    """One named deviation of the engine, where it applies and what 1.6.1 made of it."""

    name: str
    description: str
    surfaces: frozenset[str]
    observed: str


def _fault(name: str, description: str, surfaces: Iterable[str], observed: str) -> EngineFault:
    return EngineFault(name, description, frozenset(surfaces), observed)


_CATALOGUE: tuple[EngineFault, ...] = (
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
        "weight updates and set_weight_version answer ok but the reported version never changes",
        [ADMIN],
        "not visible to the frontend: admin calls go straight to the worker's system "
        "server, which answers 200 ok",
    ),
    _fault(
        "update_keeps_old_weights",
        "weight updates answer ok (and record the version) but generation keeps the old weights",
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
        "pause_not_applied",
        "pause_generation answers ok but requests keep generating",
        [ADMIN],
        "not visible to the frontend: admin calls go straight to the worker's system "
        "server, which answers 200 ok",
    ),
)

ENGINE_FAULTS: Mapping[str, EngineFault] = MappingProxyType({f.name: f for f in _CATALOGUE})
ENGINE_FAULT_NAMES: tuple[str, ...] = tuple(f.name for f in _CATALOGUE)


class UnknownEngineFaultError(ValueError):
    """Raised for engine-fault names that are not in the catalogue; lists the valid ones."""

    def __init__(self, unknown: Iterable[str]) -> None:
        self.unknown = tuple(unknown)
        super().__init__(
            f"unknown engine fault(s): {', '.join(self.unknown)}; "
            f"valid engine faults are: {', '.join(ENGINE_FAULT_NAMES)}"
        )


def validate_engine_fault_names(names: Iterable[str]) -> tuple[str, ...]:
    """Return the names sorted and de-duplicated, or raise ``UnknownEngineFaultError``."""
    wanted = list(names)
    unknown = [n for n in wanted if n not in ENGINE_FAULTS]
    if unknown:
        raise UnknownEngineFaultError(unknown)
    return tuple(sorted(set(wanted)))


class EngineFaults:
    """The engine faults switched on for one worker process (fixed at start-up)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._active = frozenset(validate_engine_fault_names(names))

    def active(self, name: str) -> bool:
        """Is ``name`` on?  Asking for a name not in the catalogue is a programming error."""
        if name not in ENGINE_FAULTS:
            raise KeyError(f"no engine fault named {name!r} in the catalogue")
        return name in self._active

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._active))


def catalogue_lines() -> list[str]:
    """``NAME<TAB>description`` lines, as printed by ``--list-engine-faults``."""
    return [f"{f.name}\t{f.description}" for f in _CATALOGUE]
