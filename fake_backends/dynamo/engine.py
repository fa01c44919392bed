"""The toy engine behind ``fake_backends.dynamo.worker``, with no Dynamo import.

Why separate from the worker: everything here is plain asyncio on dicts (the preprocessed
request Dynamo's frontend sends, the ``LLMEngineOutput`` chunks it expects back, the RL admin
bodies and replies), so it can be unit-tested in our own environment, while
``dynamo_worker`` only wires it into Dynamo's runtime inside the Dynamo environment.

The engine generates with ``fake_backends.model.toy_model`` one token at a time (so pause, abort
and weight updates take effect between tokens, as in vLLM), and answers in the shapes
observed from Dynamo 1.6.1 workers (observed.md §4.2, fixtures/dynamo-1.6.1):

* each chunk is ``{index, token_ids, log_probs?, top_logprobs?}``, one token per chunk;
* a choice's last chunk adds ``finish_reason`` (``length`` / ``eos`` / ``stop`` /
  ``cancelled``), ``stop_reason`` (the id of an EOS or stop token), ``completion_usage``
  and ``engine_data`` (``prompt_logprobs`` in vLLM's string-keyed shape; with
  ``nvext.extra_fields: ["engine_data"]`` also the RL payload of vLLM's
  ``_accumulate_engine_data`` plus ``weight_version``);
* SGLang-native requests (``extra_args.sglang_tito``) get SGLang's own cumulative objects as
  ``engine_data.sglang_response``, which the frontend forwards verbatim.

The RL admin handlers copy the replies of ``dynamo/vllm/handlers.py`` (1.6.1) on the toy.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fake_backends.faults.catalogue import ActiveFaults
from fake_backends.faults.engine import engine_faults
from fake_backends.model.decoding import (
    DEFAULT_MAX_TOKENS,
    PromptPosition,
    choice_seed,
    score_prompt,
)
from fake_backends.model.prefix_cache import PrefixCache
from fake_backends.model.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    byte_level_ids,
    decode,
    token_bytes,
)
from fake_backends.model.tokenizer import token_text as worker_token_text
from fake_backends.model.toy_model import Alternative, Context, ToyModel

log = logging.getLogger("fake_backends.dynamo.engine")

INITIAL_WEIGHTS = "initial"
# A prompt that starts with these ids (``<pad><pad><pad><s>``, which neither the chat
# template nor the text encoder ever produce) is a *script*: the engine replays the ids after
# the prefix as its completion instead of sampling.  Tests use it to push arbitrary ids
# (raw bytes, broken UTF-8, specials) through the real frontend's detokenizer.
SCRIPT_PREFIX = (PAD_ID, PAD_ID, PAD_ID, BOS_ID)
MISALIGNED_CHUNK_TOKENS = 3
GATE_POLL_S = 0.02
WAIT_DRAIN_POLL_S = 0.01

NOT_OBJECT = {"status": "error", "message": "request body must be a JSON object"}
NOT_PAUSED = (
    "Worker must be paused via pause_generation() before updating weights. Call "
    "pause_generation() first, then update, then resume_generation()."
)
PAUSE_MODES = ("keep", "wait", "abort")
# vLLM's _DISTRIBUTED_WEIGHT_UPDATE_RESERVED_KEYS: what is not part of the transfer itself.
DISTRIBUTED_RESERVED = frozenset(
    {"allow_unpaused", "engine_rpc", "reset_prefix_cache", "weight_version"}
)

Json = dict[str, Any]
AdminHandler = Callable[[Any], Awaitable[Json]]


class RequestContext(Protocol):
    """The part of Dynamo's ``Context`` the engine uses (duck-typed for tests)."""

    def id(self) -> str: ...

    def is_stopped(self) -> bool: ...


class _Undeclared:
    """vLLM's "no weight version declared yet" sentinel (distinct from a declared null)."""

    def __repr__(self) -> str:
        return "UNDECLARED"


UNDECLARED = _Undeclared()


def _int_or(value: Any, default: int | None) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def _ids(value: Any) -> frozenset[int]:
    if not isinstance(value, list):
        return frozenset()
    return frozenset(v for v in value if _int_or(v, None) is not None)


def _section(request: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = request.get(key)
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class ParsedRequest:
    """The preprocessed request, reduced to what the toy needs."""

    prompt: tuple[int, ...]
    n: int
    max_tokens: int
    min_tokens: int
    temperature: float | None
    seed: int | None
    ignore_eos: bool
    eos_ids: frozenset[int]
    end_ids: frozenset[int]
    logprobs: int | None
    prompt_logprobs: int | None
    extra_fields: frozenset[str]
    sglang: Mapping[str, Any] | None
    cached_tokens: int = 0
    """Prompt tokens this worker's prefix cache held when the request arrived."""

    @property
    def greedy(self) -> bool:
        return self.temperature is None or self.temperature == 0


def parse_request(request: Mapping[str, Any]) -> ParsedRequest:
    """Read the fields the frontend fills (observed.md §4.1); anything absent gets a default."""
    stop = _section(request, "stop_conditions")
    sampling = _section(request, "sampling_options")
    output = _section(request, "output_options")
    extra = _section(request, "extra_args")
    nvext = extra.get("nvext") if isinstance(extra.get("nvext"), Mapping) else {}
    fields = nvext.get("extra_fields") if isinstance(nvext, Mapping) else None
    sglang = extra.get("sglang_tito")
    prompt = tuple(t for t in request.get("token_ids") or [] if _int_or(t, None) is not None)
    temperature = sampling.get("temperature")
    ignore_eos = stop.get("ignore_eos") is True
    eos_ids = _ids(request.get("eos_token_ids")) | {EOS_ID}
    # Like vLLM, the engine knows its own EOS: the vLLM-native route sends neither
    # eos_token_ids nor stop_token_ids_hidden, yet generation must still end at EOS.
    end_ids = (
        _ids(stop.get("stop_token_ids_hidden"))
        | _ids(stop.get("stop_token_ids_visible"))
        | _ids(stop.get("stop_token_ids"))
        | (frozenset() if ignore_eos else eos_ids)
    )
    if isinstance(sglang, Mapping):
        return _parse_sglang(prompt, sglang, stop)
    return ParsedRequest(
        prompt=prompt,
        n=max(1, _int_or(sampling.get("n"), 1) or 1),
        max_tokens=max(1, _int_or(stop.get("max_tokens"), DEFAULT_MAX_TOKENS) or 1),
        min_tokens=max(0, _int_or(stop.get("min_tokens"), 0) or 0),
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        seed=_int_or(sampling.get("seed"), None),
        ignore_eos=ignore_eos,
        eos_ids=eos_ids,
        end_ids=end_ids,
        logprobs=_int_or(output.get("logprobs"), None),
        prompt_logprobs=_int_or(output.get("prompt_logprobs"), None),
        extra_fields=frozenset(f for f in fields or [] if isinstance(f, str))
        if isinstance(fields, list)
        else frozenset(),
        sglang=None,
    )


def _parse_sglang(
    prompt: tuple[int, ...], body: Mapping[str, Any], stop: Mapping[str, Any]
) -> ParsedRequest:
    """SGLang's own sampling parameters; SGLang stops at the model's EOS unless told not to."""
    params = body.get("sampling_params")
    params = params if isinstance(params, Mapping) else {}
    temperature = params.get("temperature")
    ignore_eos = params.get("ignore_eos") is True
    max_new = _int_or(params.get("max_new_tokens"), None)
    if max_new is None:
        max_new = _int_or(stop.get("max_tokens"), DEFAULT_MAX_TOKENS)
    top_n = _int_or(body.get("top_logprobs_num"), 0) or 0
    return ParsedRequest(
        prompt=prompt,
        n=1,
        max_tokens=max(1, max_new or DEFAULT_MAX_TOKENS),
        min_tokens=max(0, _int_or(params.get("min_new_tokens"), 0) or 0),
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        seed=_int_or(params.get("sampling_seed"), None),
        ignore_eos=ignore_eos,
        eos_ids=frozenset({EOS_ID}),
        end_ids=_ids(params.get("stop_token_ids")) | (frozenset() if ignore_eos else {EOS_ID}),
        logprobs=top_n if body.get("return_logprob") is True else None,
        prompt_logprobs=None,
        extra_fields=frozenset(),
        sglang=body,
    )


@dataclass
class _Flight:
    """One request in flight: what pause/abort need to know about it."""

    request_id: str
    started: bool = False
    aborted: bool = False


@dataclass
class _Choice:
    """One choice being generated."""

    index: int
    rng: random.Random
    weights: str
    context: Context
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str | None = None
    stop_reason: int | None = None
    script: tuple[int, ...] | None = None


@dataclass(frozen=True)
class _Token:
    token_id: int
    logprob: float
    rank: int
    top: tuple[Alternative, ...]  # the k most likely ids (k = the requested logprobs)

    def alternatives(self) -> tuple[Alternative, ...]:
        """vLLM's list for one position: the top-k, the sampled token first if outside it."""
        if any(a.token_id == self.token_id for a in self.top):
            return self.top
        return (Alternative(self.token_id, self.logprob, self.rank), *self.top)


class _Stopped(Exception):
    """The client went away (Dynamo context stopped): end the stream without a chunk."""


class ToyEngine:
    """Generation, pause/resume and weight updates of one toy worker."""

    def __init__(self, faults: ActiveFaults | None = None, weights: str = INITIAL_WEIGHTS) -> None:
        self.faults = faults or engine_faults()
        self.weights = weights
        self.version: Any = UNDECLARED
        self.pause_mode: str | None = None
        self.shutting_down = False
        self.weight_groups: list[Json] = []
        self.updates: list[Json] = []
        self._models: dict[str, ToyModel] = {}
        self._flights: dict[str, _Flight] = {}
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._lock = asyncio.Lock()
        self.prefix_cache = PrefixCache()

    # ------------------------------------------------------------------ model state

    def model(self, weights: str | None = None) -> ToyModel:
        tag = self.weights if weights is None else weights
        found = self._models.get(tag)
        if found is None:
            found = self._models[tag] = ToyModel(tag)
        return found

    def reported_version(self) -> Any:
        return None if self.version is UNDECLARED else self.version

    @property
    def in_flight(self) -> int:
        return len(self._flights)

    def shutdown(self) -> None:
        """Release every held request (they end 'cancelled') so the runtime can drain."""
        self.shutting_down = True
        self._resumed.set()

    # ------------------------------------------------------------------ generation

    async def generate(
        self, request: Mapping[str, Any], context: RequestContext | None = None
    ) -> AsyncIterator[Json]:
        """The Dynamo endpoint handler: preprocessed request in, engine-output chunks out."""
        parsed = parse_request(request)
        parsed = dataclasses.replace(
            parsed, cached_tokens=self.prefix_cache.cached_tokens(parsed.prompt)
        )
        self.prefix_cache.insert(parsed.prompt)
        request_id = context.id() if context is not None else str(uuid.uuid4())
        flight = _Flight(request_id)
        self._flights[request_id] = flight
        try:
            stream = (
                self._sglang_stream(parsed, flight, context)
                if parsed.sglang is not None
                else self._token_stream(parsed, flight, context)
            )
            async for chunk in stream:
                yield chunk
        except _Stopped:
            log.info("request %s: client went away", request_id)
        finally:
            self._flights.pop(request_id, None)

    def _held(self, flight: _Flight) -> bool:
        if self.pause_mode is None or self.faults.active("pause_not_applied"):
            return False
        return not (self.pause_mode == "wait" and flight.started)

    async def _gate(self, flight: _Flight, context: RequestContext | None) -> bool:
        """Wait while paused.  True: go on; False: the request was aborted (end it)."""
        while True:
            if context is not None and context.is_stopped():
                raise _Stopped
            if flight.aborted or self.shutting_down:
                return False
            if not self._held(flight):
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._resumed.wait(), GATE_POLL_S)

    def _new_choice(self, parsed: ParsedRequest, index: int) -> _Choice:
        seed = choice_seed(parsed.seed, index)
        prefix = len(SCRIPT_PREFIX)
        script = parsed.prompt[prefix:] if parsed.prompt[:prefix] == SCRIPT_PREFIX else None
        return _Choice(
            index,
            random.Random(seed),
            self.weights,
            self.model().context(parsed.prompt),
            script=script or None,
        )

    def _step(self, parsed: ParsedRequest, choice: _Choice, limit: int) -> _Token:
        """Sample one token for ``choice`` with the current weights and note how it ended."""
        if choice.weights != self.weights:  # weights changed mid-request: rehash the context
            choice.weights = self.weights
            choice.context = self.model().context([*parsed.prompt, *choice.ids])
        dist = self.model().distribution(
            choice.context, len(choice.ids), include_eos=not parsed.ignore_eos
        )
        excluded = parsed.end_ids if len(choice.ids) < parsed.min_tokens else frozenset()
        if choice.script is not None:
            token = choice.script[len(choice.ids)]
            limit = min(limit, len(choice.script))
        elif parsed.greedy:
            token = dist.argmax(excluded)
        else:
            assert parsed.temperature is not None
            token = dist.sample(choice.rng, parsed.temperature, excluded)
        choice.context.append(token)
        choice.ids.append(token)
        logprob = dist.logprob(token)
        choice.logprobs.append(logprob)
        if token in parsed.end_ids:
            choice.finish = "eos" if token in parsed.eos_ids else "stop"
            choice.stop_reason = token
        elif len(choice.ids) >= limit:
            choice.finish = "length"
        top = dist.top(parsed.logprobs) if parsed.logprobs is not None else ()
        rank = next((a.rank for a in top if a.token_id == token), None) or dist.rank(token)
        return _Token(token, logprob, rank, top)

    def _limit(self, parsed: ParsedRequest) -> int:
        if self.faults.active("cancelled_finish") or self.faults.active("abort_finish"):
            return max(1, parsed.max_tokens // 2)
        return parsed.max_tokens

    def _reported_finish(self, choice: _Choice) -> tuple[str, int | None]:
        """(finish_reason, stop_reason) as the engine reports them, faults applied."""
        finish, stop_reason = choice.finish or "length", choice.stop_reason
        if self.faults.active("cancelled_finish"):
            finish, stop_reason = "cancelled", None
        elif self.faults.active("abort_finish"):
            finish, stop_reason = "abort", None
        elif finish == "eos" and self.faults.active("eos_as_stop"):
            finish, stop_reason = "stop", None
        if self.faults.active("unknown_finish_reason"):
            finish = "weird_reason"
        return finish, stop_reason

    async def _token_stream(
        self, parsed: ParsedRequest, flight: _Flight, context: RequestContext | None
    ) -> AsyncIterator[Json]:
        choices = [self._new_choice(parsed, i) for i in range(parsed.n)]
        limit = self._limit(parsed)
        per_chunk = MISALIGNED_CHUNK_TOKENS if self.faults.active("logprobs_misaligned") else 1
        generated = 0
        prompt_logprobs: list[Any] | None = None
        while any(c.finish is None for c in choices):
            for choice in choices:
                if choice.finish is not None:
                    continue
                if not await self._gate(flight, context):
                    choice.finish = "cancelled"
                    yield self._final(
                        parsed,
                        choice,
                        {"index": choice.index, "token_ids": []},
                        generated,
                        prompt_logprobs,
                        aborted=True,
                    )
                    continue
                if parsed.prompt_logprobs is not None and prompt_logprobs is None:
                    prompt_logprobs = self._prompt_logprobs(parsed)
                tokens: list[_Token] = []
                while len(tokens) < per_chunk and choice.finish is None:
                    tokens.append(self._step(parsed, choice, limit))
                flight.started = True
                generated += len(tokens)
                chunk = self._chunk(parsed, choice, tokens)
                if choice.finish is not None:
                    chunk = self._final(parsed, choice, chunk, generated, prompt_logprobs)
                yield chunk
                await asyncio.sleep(0)  # let admin calls and other requests interleave

    def _chunk(self, parsed: ParsedRequest, choice: _Choice, tokens: Sequence[_Token]) -> Json:
        chunk: Json = {"index": choice.index, "token_ids": [t.token_id for t in tokens]}
        if parsed.logprobs is not None:
            logprobs = [t.logprob for t in tokens]
            tops = [[self._top_entry(a) for a in t.alternatives()] for t in tokens]
            if self.faults.active("logprobs_misaligned"):
                logprobs, tops = logprobs[:1], tops[:1]
            if choice.finish is not None and self.faults.active("selected_logprobs_one_short"):
                logprobs, tops = logprobs[:-1], tops[:-1]
            chunk["log_probs"] = logprobs
            chunk["top_logprobs"] = tops
        if self.faults.active("worker_text_field"):
            chunk["text"] = "<worker-text>"
        return chunk

    def _top_entry(self, alt: Alternative) -> Json:
        """A vLLM-worker top-logprob entry; ``token: null`` lets the frontend decode the id."""
        token: str | None = None
        raw = token_bytes(alt.token_id)
        if self.faults.active("wrong_top_logprob_token"):
            token = f"<T{alt.token_id}>"
            raw = token.encode()
        return {
            "rank": alt.rank,
            "token_id": alt.token_id,
            "token": token,
            "logprob": alt.logprob,
            "bytes": list(raw) if raw else None,
        }

    def _final(
        self,
        parsed: ParsedRequest,
        choice: _Choice,
        chunk: Json,
        generated: int,
        prompt_logprobs: list[Any] | None,
        *,
        aborted: bool = False,
    ) -> Json:
        finish, stop_reason = ("cancelled", None) if aborted else self._reported_finish(choice)
        chunk["finish_reason"] = finish
        if stop_reason is not None:
            chunk["stop_reason"] = stop_reason
        prompt_tokens = len(parsed.prompt)
        completion_tokens = generated
        if self.faults.active("usage_lies"):
            prompt_tokens += 1000
            completion_tokens += 2000
        chunk["completion_usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": parsed.cached_tokens},
        }
        engine_data: Json = {}
        if prompt_logprobs is not None:
            engine_data["prompt_logprobs"] = prompt_logprobs
        if "engine_data" in parsed.extra_fields:
            engine_data.update(self._rl_engine_data(parsed, choice))
        if engine_data:
            chunk["engine_data"] = engine_data
        return chunk

    def _rl_engine_data(self, parsed: ParsedRequest, choice: _Choice) -> Json:
        """What vLLM's ``_accumulate_engine_data`` attaches, plus the toy's weight version."""
        ids = list(choice.ids)
        if self.faults.active("completion_ids_retokenized"):
            ids = byte_level_ids(decode(ids))
        data: Json = {"completion_token_ids": ids, "finished": True}
        logprobs = list(choice.logprobs) if parsed.logprobs is not None else []
        if parsed.logprobs is not None and self.faults.active("selected_logprobs_one_short"):
            logprobs = logprobs[:-1]
        if logprobs and len(logprobs) == len(choice.ids):
            data["completion_logprobs"] = logprobs
        data["prompt_token_ids"] = list(parsed.prompt)
        data["weight_version"] = self.reported_version()
        return data

    def _prompt_logprobs(self, parsed: ParsedRequest) -> list[Any]:
        """vLLM's shape: ``[null, {"<id>": {logprob, rank, decoded_token}}, ...]``."""
        k = parsed.prompt_logprobs or 0
        scored = score_prompt(self.model(), parsed.prompt, k, include_eos=not parsed.ignore_eos)
        out: list[Any] = [_vllm_position(p) for p in scored]
        if self.faults.active("prompt_logprobs_shifted_by_one") and out:
            out = [None, *out[:-1]]
        if self.faults.active("prompt_logprobs_int_keys"):
            out = [None if p is None else {int(k): v for k, v in p.items()} for p in out]
        return out

    # ------------------------------------------------------------------ SGLang native

    async def _sglang_stream(
        self, parsed: ParsedRequest, flight: _Flight, context: RequestContext | None
    ) -> AsyncIterator[Json]:
        body = parsed.sglang or {}
        raw_rid = body.get("rid")
        rid = raw_rid if isinstance(raw_rid, str) else str(uuid.uuid4())
        choice = self._new_choice(parsed, 0)
        limit = self._limit(parsed)
        start = _int_or(body.get("logprob_start_len"), -1)
        start = -1 if start is None else start
        with_input = parsed.logprobs is not None and 0 <= start <= len(parsed.prompt)
        inputs = self._sglang_inputs(parsed, start) if with_input else None
        tokens: list[_Token] = []
        while choice.finish is None:
            if not await self._gate(flight, context):
                choice.finish = "cancelled"
                yield _sglang_chunk(
                    self._sglang_response(parsed, rid, choice, tokens, inputs, aborted=True)
                )
                return
            tokens.append(self._step(parsed, choice, limit))
            flight.started = True
            yield _sglang_chunk(self._sglang_response(parsed, rid, choice, tokens, inputs))
            await asyncio.sleep(0)

    def _sglang_inputs(
        self, parsed: ParsedRequest, start: int
    ) -> tuple[list[list[Any]], list[Any]]:
        """input_token_logprobs from ``start``; the first logprob is always null (as SGLang)."""
        scored = score_prompt(self.model(), parsed.prompt, parsed.logprobs or 0)
        later = scored[start + 1 :]
        values: list[float | None] = [None, *(p.logprob if p else None for p in later)]
        tops: list[Any] = [None, *(_triples(p.top) if p else None for p in later)]
        ids = list(parsed.prompt[start:])
        values, tops = values[: len(ids)], tops[: len(ids)]
        if self.faults.active("prompt_logprobs_shifted_by_one") and values:
            values, tops = [None, *values[:-1]], [None, *tops[:-1]]
        return [[v, t, None] for v, t in zip(values, ids, strict=True)], tops

    def _sglang_response(
        self,
        parsed: ParsedRequest,
        rid: str,
        choice: _Choice,
        tokens: Sequence[_Token],
        inputs: tuple[list[list[Any]], list[Any]] | None,
        *,
        aborted: bool = False,
    ) -> Json:
        """SGLang's default (cumulative) streaming object after ``tokens``."""
        ids = [t.token_id for t in tokens]
        prompt_tokens, completion_tokens = len(parsed.prompt), len(ids)
        if self.faults.active("usage_lies"):
            prompt_tokens, completion_tokens = prompt_tokens + 1000, completion_tokens + 2000
        meta: Json = {
            "id": rid,
            "finish_reason": self._sglang_finish(choice, aborted),
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cached_tokens": 0,
            "weight_version": "default" if self.version is UNDECLARED else self.version,
        }
        if parsed.logprobs is not None:
            selected = [[t.logprob, t.token_id, None] for t in tokens]
            if choice.finish is not None and self.faults.active("selected_logprobs_one_short"):
                selected = selected[:-1]
            if inputs is not None:
                meta["input_token_logprobs"] = inputs[0]
            meta["output_token_logprobs"] = selected
            if parsed.logprobs > 0:
                if inputs is not None:
                    meta["input_top_logprobs"] = inputs[1]
                meta["output_top_logprobs"] = [_triples(t.top) for t in tokens]
        return {"text": decode(ids), "output_ids": ids, "meta_info": meta}

    def _sglang_finish(self, choice: _Choice, aborted: bool) -> Json | None:
        if choice.finish is None:
            return None
        if aborted or self.faults.active("cancelled_finish"):
            return {"type": "abort", "message": "Abort before/while generating"}
        if self.faults.active("unknown_finish_reason"):
            return {"type": "weird_reason"}
        if choice.finish == "length":
            return {"type": "length", "length": len(choice.ids)}
        return {"type": "stop", "matched": choice.stop_reason}

    # ------------------------------------------------------------------ RL admin routes

    def admin_routes(self) -> dict[str, AdminHandler]:
        """The vLLM Python worker's RL route family (dynamo/vllm/worker_factory.py)."""
        return {
            "liveness_probe": self.liveness_probe,
            "pause_generation": self.pause_generation,
            "resume_generation": self.resume_generation,
            "flush_cache": self.flush_cache,
            "abort_request": self.abort_request,
            "update_weights_from_disk": self.update_weights_from_disk,
            "update_weights_from_distributed": self.update_weights_from_distributed,
            "update_weights_from_tensor": self.update_weights_from_tensor,
            "init_weights_update_group": self.init_weights_update_group,
            "destroy_weights_update_group": self.destroy_weights_update_group,
            "get_weight_version": self.get_weight_version,
            "set_weight_version": self.set_weight_version,
        }

    async def liveness_probe(self, body: Any) -> Json:
        if _not_object(body):
            return dict(NOT_OBJECT)
        return {"status": "ok", "alive": True}

    async def pause_generation(self, body: Any) -> Json:
        if _not_object(body):
            return dict(NOT_OBJECT)
        body = body or {}
        mode = body.get("mode", "keep")
        clear_cache = bool(body.get("clear_cache", False))
        if mode not in PAUSE_MODES:
            return {
                "status": "error",
                "message": f"Invalid mode '{mode}'; expected keep|wait|abort",
            }
        async with self._lock:
            self.pause_mode = mode
            self._resumed.clear()
            if mode == "abort" and not self.faults.active("pause_not_applied"):
                for flight in self._flights.values():
                    flight.aborted = True
            if mode == "wait" and not self.faults.active("pause_not_applied"):
                while any(f.started and not f.aborted for f in self._flights.values()):
                    await asyncio.sleep(WAIT_DRAIN_POLL_S)
            log.info("[RL] Engine paused (mode=%s, clear_cache=%s)", mode, clear_cache)
            return {
                "status": "ok",
                "message": "Engine paused",
                "mode": mode,
                "clear_cache": clear_cache,
            }

    async def resume_generation(self, body: Any) -> Json:
        if _not_object(body):
            return dict(NOT_OBJECT)
        async with self._lock:
            self.pause_mode = None
            self._resumed.set()
            log.info("[RL] Engine resumed")
            return {"status": "ok", "message": "Engine resumed"}

    async def flush_cache(self, body: Any) -> Json:
        if _not_object(body):
            return dict(NOT_OBJECT)
        async with self._lock:
            if not self.faults.active("kv_not_flushed"):
                self.prefix_cache.clear()
            return {"status": "ok", "message": "Cache flushed"}

    async def abort_request(self, body: Any) -> Json:
        if _not_object(body):
            return dict(NOT_OBJECT)
        request_id = (body or {}).get("request_id")
        if not request_id:
            return {"status": "error", "message": "Missing 'request_id' in body"}
        flight = self._flights.get(str(request_id))
        if flight is not None:  # like vLLM, an unknown id is aborted without complaint
            flight.aborted = True
        return {"status": "ok", "request_id": request_id}

    async def get_weight_version(self, body: Any) -> Json:
        if _not_object(body):
            return dict(NOT_OBJECT)
        declared = self.version is not UNDECLARED
        return {
            "status": "ok",
            "version": self.version if declared else None,
            "version_declared": declared,
        }

    async def set_weight_version(self, body: Any) -> Json:
        if _not_object(body):
            return dict(NOT_OBJECT)
        body = body or {}
        if "weight_version" not in body:
            return {"status": "error", "message": "Missing 'weight_version' in body"}
        version = body["weight_version"]
        self._declare(version)
        return {"status": "ok", "version": version}

    async def update_weights_from_disk(self, body: Any) -> Json:
        """Refused unless paused; the toy "checkpoint" is named by ``model_path`` alone (the
        path need not exist: the new weights are derived from it, see ``path_weights``)."""
        if _not_object(body):
            return dict(NOT_OBJECT)
        body = body or {}
        async with self._lock:
            if self.pause_mode is None:
                return {"status": "error", "message": NOT_PAUSED}
            path = body.get("model_path")
            if not path:
                return {"status": "error", "message": "Missing 'model_path' in body"}
            version = body.get("weight_version", "unknown")
            self._load(path_weights(str(path)), {"route": "update_weights_from_disk", **body})
            if "weight_version" in body:
                self._declare(version)
            return {
                "status": "ok",
                "version": version,
                "version_declared": "weight_version" in body,
            }

    async def update_weights_from_distributed(self, body: Any) -> Json:
        """vLLM's checks, plus: needs an initialized group (vLLM's collective RPC fails
        without one).  The new weights are derived from the transfer's payload."""
        if _not_object(body):
            return dict(NOT_OBJECT)
        body = body or {}
        allow_unpaused = body.get("allow_unpaused", False)
        reset_prefix_cache = body.get("reset_prefix_cache", True)
        if not isinstance(allow_unpaused, bool):
            return {"status": "error", "message": "'allow_unpaused' must be a boolean"}
        if not isinstance(reset_prefix_cache, bool):
            return {"status": "error", "message": "'reset_prefix_cache' must be a boolean"}
        if allow_unpaused and reset_prefix_cache:
            return {
                "status": "error",
                "message": "Unpaused weight updates cannot reset the prefix cache. Set "
                "'reset_prefix_cache' to false or pause generation first.",
            }
        async with self._lock:
            if self.pause_mode is None and not allow_unpaused:
                return {"status": "error", "message": NOT_PAUSED}
            if not self.weight_groups:
                return {
                    "status": "error",
                    "message": "no weight update group: call init_weights_update_group first",
                }
            version = body.get("weight_version", "unknown")
            payload = {k: v for k, v in body.items() if k not in DISTRIBUTED_RESERVED}
            self._load(
                payload_weights("distributed", payload),
                {"route": "update_weights_from_distributed", **body},
            )
            if "weight_version" in body:
                self._declare(version)
            return {
                "status": "ok",
                "version": version,
                "version_declared": "weight_version" in body,
            }

    async def update_weights_from_tensor(self, body: Any) -> Json:
        if _not_object(body):
            return dict(NOT_OBJECT)
        return {"status": "error", "message": "update_weights_from_tensor is not implemented"}

    async def init_weights_update_group(self, body: Any) -> Json:
        if _not_object(body):
            return dict(NOT_OBJECT)
        async with self._lock:
            self.weight_groups.append(dict(body or {}))
            return {"status": "ok", "message": "Weight update group initialized"}

    async def destroy_weights_update_group(self, body: Any) -> Json:
        if _not_object(body):
            return dict(NOT_OBJECT)
        async with self._lock:
            self.weight_groups.clear()
            return {"status": "ok", "message": "Weight update group destroyed"}

    def _load(self, tag: str, record: Json) -> None:
        self.updates.append(record)
        if not self.faults.active("update_keeps_old_weights"):
            self.weights = tag
            self.prefix_cache.clear()
        log.info("[RL] weights now %r (%s)", self.weights, record["route"])

    def _declare(self, version: Any) -> None:
        if not self.faults.active("weight_version_unchanged"):
            self.version = version


def path_weights(model_path: str) -> str:
    """Weights tag of a checkpoint on disk.  Same derivation as the fake deployment
    (``fake_backends.runtime.weights``), so one update gives the same tokens in both."""
    return f"path:{model_path}"


def payload_weights(kind: str, payload: Any) -> str:
    """Weights tag of a transfer: the canonical JSON of what was sent (as the fake does)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return f"{kind}:{canonical}"


def _not_object(body: Any) -> bool:
    """vLLM's handlers treat a missing body as ``{}`` and refuse anything but an object."""
    return body is not None and not isinstance(body, dict)


def _triples(alternatives: Sequence[Alternative]) -> list[list[Any]]:
    return [[a.logprob, a.token_id, None] for a in alternatives]


def _vllm_position(position: PromptPosition | None) -> dict[str, Json] | None:
    """The prompt token first with its true rank, then the top-k; keys are decimal strings."""
    if position is None:
        return None
    entry = {
        str(position.token_id): {
            "logprob": position.logprob,
            "rank": position.rank,
            "decoded_token": worker_token_text(position.token_id),
        }
    }
    for alt in position.top:
        entry.setdefault(
            str(alt.token_id),
            {
                "logprob": alt.logprob,
                "rank": alt.rank,
                "decoded_token": worker_token_text(alt.token_id),
            },
        )
    return entry


def _sglang_chunk(response: Json) -> Json:
    """How Dynamo's SGLang worker forwards a native object (sglang/engine_generate.py)."""
    return {"token_ids": [], "engine_data": {"sglang_response": response}}
