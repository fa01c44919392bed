"""The toy engine behind ``fake_backends.dynamo.worker``, with no Dynamo import.

Why separate from the worker: everything here is plain asyncio on dicts (the preprocessed
request Dynamo's frontend sends, the ``LLMEngineOutput`` chunks it expects back, the RL admin
bodies and replies), so it can be unit-tested in our own environment, while
``dynamo_worker`` only wires it into Dynamo's runtime inside the Dynamo environment.

The engine generates with ``fake_backends.model.toy_model`` one token at a time (so pause, abort
and weight updates take effect between tokens, as in vLLM), and answers in the shapes
observed from Dynamo 1.6.1 workers (CONTRACT-NOTES §O4.2, fixtures/dynamo-1.6.1):

* each chunk is ``{index, token_ids, log_probs?, top_logprobs?}``, one token per chunk;
* a choice's last chunk adds ``finish_reason`` (``length`` / ``eos`` / ``stop`` /
  ``cancelled``), ``stop_reason`` (the id of an EOS or stop token), ``completion_usage``
  and ``engine_data`` (``prompt_logprobs`` in vLLM's string-keyed shape; with
  ``nvext.extra_fields: ["engine_data"]`` also the RL payload of vLLM's
  ``_accumulate_engine_data`` plus ``weight_version``);
* SGLang-native requests (``extra_args.sglang_tito``) get SGLang's own cumulative objects as
  ``engine_data.sglang_response``, which the frontend forwards verbatim.

What a worker *is* (weights, declared version, prefix cache, weight-update groups) and what
pausing, aborting and draining *do* are the fake deployment's own runtime
(`fake_backends.runtime`): one `EngineWorker` with its `WorkerRuntime`. The RL admin routes are
the fake deployment's vLLM route table (`fake_backends.admin.vllm`, the replies of
``dynamo/vllm/handlers.py`` 1.6.1), called through `admin.routes.call`: one implementation of
the control plane, served by our system server in the fake deployment and by Dynamo's here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_backends.admin.routes import AdminRoutes, call
from fake_backends.admin.sglang import NATIVE_ROUTES, sglang_routes
from fake_backends.admin.vllm import python_routes
from fake_backends.dynamo.requests import (
    Json,
    ParsedRequest,
    RequestContext,
    int_or,
    parse_request,
)
from fake_backends.faults.catalogue import ActiveFaults
from fake_backends.faults.engine import engine_faults
from fake_backends.model.decoding import (
    PromptPosition,
    choice_seed,
    score_prompt,
)
from fake_backends.model.tokenizer import (
    BOS_ID,
    PAD_ID,
    byte_level_ids,
    decode,
    token_bytes,
)
from fake_backends.model.tokenizer import token_text as worker_token_text
from fake_backends.model.toy_model import Alternative, Context, ToyModel
from fake_backends.runtime.scheduler import ClientGone, Generation, WorkerRuntime
from fake_backends.runtime.workers import EngineWorker

IDLE_POLL_S = 0.01

log = logging.getLogger("fake_backends.dynamo.engine")

INITIAL_WEIGHTS = "initial"
# A prompt that starts with these ids (``<pad><pad><pad><s>``, which neither the chat
# template nor the text encoder ever produce) is a *script*: the engine replays the ids after
# the prefix as its completion instead of sampling.  Tests use it to push arbitrary ids
# (raw bytes, broken UTF-8, specials) through the real frontend's detokenizer.
SCRIPT_PREFIX = (PAD_ID, PAD_ID, PAD_ID, BOS_ID)
MISALIGNED_CHUNK_TOKENS = 3

NOT_PAUSED = (
    "Worker must be paused via pause_generation() before updating weights. Call "
    "pause_generation() first, then update, then resume_generation()."
)

ADMIN_FAMILIES = ("vllm", "sglang")
"""`vllm`: the vLLM Python worker's RL routes, registered with `/v1/rl/workers`; `sglang`: SGLang's
built-in `control/*` routes and its default native routes, not registered (SGLang workers are
reached by URL)."""

RouteCallback = Callable[[Any], Awaitable[Json]]
Stopped = Callable[[], bool] | None  # the request context's "client went away"


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


class ToyEngine:
    """Generation of one toy worker, over the runtime's worker and scheduler."""

    def __init__(
        self,
        faults: ActiveFaults | None = None,
        weights: str = INITIAL_WEIGHTS,
        admin_family: str = "vllm",
        token_interval_s: float = 0.0,
    ) -> None:
        if admin_family not in ADMIN_FAMILIES:
            raise ValueError(
                f"admin family: expected one of {', '.join(ADMIN_FAMILIES)}, observed "
                f"{admin_family!r}"
            )
        self.faults = faults or engine_faults()
        self.admin_family = admin_family
        self.token_interval_s = token_interval_s
        """Seconds between two tokens of a request (0: as fast as the event loop allows)."""
        self.worker = EngineWorker(0, 0, "toy", weights_tag=weights)
        self.worker.runtime = WorkerRuntime(self.faults)
        self.routes: AdminRoutes = python_routes() if admin_family == "vllm" else sglang_routes()

    # ------------------------------------------------------------------ model state

    @property
    def runtime(self) -> WorkerRuntime:
        return self.worker.runtime

    @property
    def weights(self) -> str:
        return self.worker.weights_tag

    def model(self) -> ToyModel:
        return self.worker.model()

    def reported_version(self) -> Any:
        return self.worker.version if self.worker.version_declared else None

    @property
    def in_flight(self) -> int:
        """Requests the worker holds or generates for."""
        return self.runtime.requests()

    def shutdown(self) -> None:
        """End every request at its next wait (held ones end 'cancelled') so the runtime can
        drain."""
        self.runtime.close()

    async def idle(self, timeout_s: float) -> None:
        """Until every request has ended, its last chunk taken by the runtime (at most
        `timeout_s`): a worker that stops before then loses the answers it just gave."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.runtime.has_requests() and loop.time() < deadline:
            await asyncio.sleep(IDLE_POLL_S)

    # ------------------------------------------------------------------ generation

    async def generate(
        self, request: Mapping[str, Any], context: RequestContext | None = None
    ) -> AsyncIterator[Json]:
        """The Dynamo endpoint handler: preprocessed request in, engine-output chunks out."""
        parsed = parse_request(request)
        cache = self.runtime.cache
        parsed = dataclasses.replace(parsed, cached_tokens=cache.cached_tokens(parsed.prompt))
        cache.insert(parsed.prompt)
        request_id = context.id() if context is not None else str(uuid.uuid4())
        gen = Generation(request_id, request_id)
        stopped = context.is_stopped if context is not None else None
        try:
            await self.runtime.admit(gen, stopped)
            stream = (
                self._sglang_stream(parsed, gen, stopped)
                if parsed.sglang is not None
                else self._token_stream(parsed, gen, stopped)
            )
            async for chunk in stream:
                yield chunk
        except ClientGone:
            log.info("request %s: client went away", request_id)
        finally:
            self.runtime.release(gen)

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
        self, parsed: ParsedRequest, gen: Generation, stopped: Stopped
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
                if not await self.runtime.next_token(gen, self.token_interval_s, stopped):
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
        self, parsed: ParsedRequest, gen: Generation, stopped: Stopped
    ) -> AsyncIterator[Json]:
        body = parsed.sglang or {}
        raw_rid = body.get("rid")
        rid = raw_rid if isinstance(raw_rid, str) else str(uuid.uuid4())
        choice = self._new_choice(parsed, 0)
        limit = self._limit(parsed)
        start = int_or(body.get("logprob_start_len"), -1)
        start = -1 if start is None else start
        with_input = parsed.logprobs is not None and 0 <= start <= len(parsed.prompt)
        inputs = self._sglang_inputs(parsed, start) if with_input else None
        tokens: list[_Token] = []
        while choice.finish is None:
            if not await self.runtime.next_token(gen, self.token_interval_s, stopped):
                choice.finish = "cancelled"
                yield _sglang_chunk(
                    self._sglang_response(parsed, rid, choice, tokens, inputs, aborted=True)
                )
                return
            tokens.append(self._step(parsed, choice, limit))
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
            "weight_version": self.worker.version if self.worker.version_declared else "default",
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

    def admin_routes(self) -> dict[str, RouteCallback]:
        """The worker's administration routes: the vLLM Python worker's RL family
        (dynamo/vllm/worker_factory.py, for `dynamo.common.rl.register_rl_routes`) or SGLang's
        `/engine` routes (for `register_engine_route`). Each callback answers as
        `admin.routes.call` does, and raises where our own system server would answer 500
        (Dynamo's does too)."""
        return {name: self._callback(name) for name in self.routes.names()}

    def follows_pause_state(self, name: str) -> bool:
        """Whether Dynamo re-syncs the worker's discovery registration with the engine's pause
        state after this route (1.6.1 `BaseWorkerHandler._invoke_engine_route`: SGLang's
        native routes)."""
        return self.admin_family == "sglang" and name in NATIVE_ROUTES

    @property
    def routable(self) -> bool:
        """Whether the engine is in a state Dynamo keeps registered for routing."""
        return self.runtime.routable

    def _callback(self, name: str) -> RouteCallback:
        async def handle(body: Any) -> Json:
            status, reply = await call(self.worker, self.routes, name, body)
            if status >= 500:
                raise RuntimeError(reply.get("message", "handler error"))
            return reply

        return handle


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
