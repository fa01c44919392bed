"""SGLang's native ``POST /generate`` as the Dynamo frontend serves it (SGLang only).

Stream only, as in the real frontend (CONTRACT-NOTES §O6.16: non-stream is a 501), and
``input_ids`` only (a ``text`` prompt is a 400, recorded from 1.6.1).  Error bodies use
the shapes recorded for this route, which are not the flat OpenAI-route shape.  Each
event is a cumulative SGLang object (SGLang's default streaming mode): full text so far,
all output ids so far, and ``meta_info`` with cumulative logprob lists of
``[logprob, token_id, null]`` triples.  ``input_token_logprobs`` starts at
``logprob_start_len`` and its first entry's logprob is always null (CONTRACT-NOTES §S1).

Events are released one token at a time through the request's ``LiveRequest``; an
aborted request ends with a final event whose ``finish_reason`` is SGLang's
``{"type": "abort", "message": "Aborted"}``.  ``meta_info.weight_version`` is the worker's
version when the event is sent (SGLang's ``"default"`` until a version is declared), as
SGLang stamps each output with its server's current version; ``meta_info.weight_versions``
gives the version of every output token so far as ``{version, start, end}`` spans (end
exclusive), so a request held by an in-place pause across an update shows both versions.
The ids after such an update still come from the weights the request was admitted under: the
toy replays its precomputed sequence, only the version it names follows the update.
``meta_info.cached_tokens`` is the prefix-cache hit.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fake_backends.encoding.sse_frames import DONE_FRAME, frame
from fake_backends.frontend.error_bodies import DESERIALIZE_PREFIX, FrontendError
from fake_backends.frontend.flow import LiveRequest
from fake_backends.frontend.streaming import TRAILING_TEXT
from fake_backends.frontend.views import reported_selected, worker_alternatives
from fake_backends.model.decoding import (
    DEFAULT_MAX_TOKENS,
    SamplingParams,
    generate_choice,
    score_prompt,
)
from fake_backends.model.tokenizer import VOCAB_SIZE
from fake_backends.model.toy_model import Alternative
from fake_backends.runtime.state import DeploymentState
from fake_backends.runtime.weights import as_generated
from fake_backends.runtime.workers import EngineWorker

Triple = list[Any]


PAUSED_RENAME_RESTAMPS = "paused_rename_restamps_tokens"
SGLANG_NON_STREAM_MESSAGE = (
    "non-streaming SGLang generate requests are not implemented; set stream=true"
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bad_request(message: str) -> FrontendError:
    """A 400 in the shape the frontend's SGLang route uses (recorded from 1.6.1)."""
    text = DESERIALIZE_PREFIX + message
    body = {"object": "error", "message": text, "type": "Bad Request", "param": None, "code": 400}
    return FrontendError(400, text, body=body)


def _int(body: Mapping[str, Any], key: str, default: int, low: int) -> int:
    value = body.get(key, default)
    if value is None:
        return default
    if not _is_int(value) or value < low:
        raise _bad_request(f"{key}: invalid value, expected an integer >= {low}")
    return int(value)


def _prompt(body: Mapping[str, Any], *, wrap_ids: bool = False) -> list[int]:
    """``input_ids`` only: the frontend's route rejects a ``text`` prompt (recorded). An id
    outside the vocabulary is refused, as Dynamo 1.7.0's SGLang worker does (``wrap_ids``: the
    fault ``token_ids_wrapped`` reduces it modulo the vocabulary instead)."""
    raw = body.get("input_ids")
    if raw is None:
        raise _bad_request("missing field `input_ids`")
    if not isinstance(raw, list) or not all(_is_int(t) for t in raw):
        raise _bad_request("input_ids: invalid type, expected a sequence of u32")
    if not raw:
        raise _bad_request("input_ids cannot be empty.")
    if wrap_ids:
        return [token % VOCAB_SIZE for token in raw]
    for index, token in enumerate(raw):
        if not 0 <= token < VOCAB_SIZE:
            # raised by the worker, not the frontend's deserializer: no deserialize prefix
            text = f"Token id {token} is out of vocabulary at input_ids[{index}]"
            body = {"object": "error", "message": text, "type": "Bad Request", "code": 400}
            raise FrontendError(400, text, body=body)
    return list(raw)


def _sampling(raw: Any, top_k: int | None) -> SamplingParams:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise _bad_request("sampling_params: invalid type, expected an object")
    n = raw.get("n", 1)
    if n not in (None, 1):
        raise _bad_request("sampling_params.n must be 1 on /generate")
    temperature = raw.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, int | float) or temperature < 0
    ):
        raise _bad_request("sampling_params.temperature must be a non-negative number")
    stop = raw.get("stop")
    if isinstance(stop, str):
        stops: tuple[str, ...] = (stop,)
    elif stop is None:
        stops = ()
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = tuple(stop)
    else:
        raise _bad_request("sampling_params.stop must be a string or an array of strings")
    stop_ids = raw.get("stop_token_ids") or []
    if not isinstance(stop_ids, list) or not all(_is_int(t) for t in stop_ids):
        raise _bad_request("sampling_params.stop_token_ids must be an array of token ids")
    ignore_eos = raw.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise _bad_request("sampling_params.ignore_eos must be a boolean")
    max_new = raw.get("max_new_tokens")
    if max_new is not None and (not _is_int(max_new) or max_new < 1):
        raise _bad_request("sampling_params.max_new_tokens must be a positive integer")
    return SamplingParams(
        max_tokens=DEFAULT_MAX_TOKENS if max_new is None else max_new,
        temperature=None if temperature is None else float(temperature),
        seed=raw.get("sampling_seed") if _is_int(raw.get("sampling_seed")) else None,
        stop=stops,
        stop_token_ids=tuple(stop_ids),
        ignore_eos=ignore_eos,
        min_tokens=_int(raw, "min_new_tokens", 0, 0),
        top_k=top_k,
    )


def _triples(alternatives: Sequence[Alternative]) -> list[Triple]:
    return [[a.logprob, a.token_id, None] for a in alternatives]


ABORT_FINISH = {"type": "abort", "message": "Aborted"}
DEFAULT_WEIGHT_VERSION = "default"


@dataclass(frozen=True)
class SglangRequest:
    """A validated native ``/generate`` request."""

    prompt: list[int]
    params: SamplingParams
    rid: str | None
    return_logprob: bool
    start: int  # logprob_start_len, -1 when input logprobs are not wanted
    top_n: int


class SglangEvents:
    """The generation of one /generate request and its cumulative events."""

    def __init__(
        self,
        state: DeploymentState,
        worker: EngineWorker,
        request: SglangRequest,
        *,
        cached_tokens: int,
    ) -> None:
        self._state = state
        self._worker = worker
        self._prompt = request.prompt
        # native_route_sequence_differs: generated as if the prompt had one more token.
        context = (
            (*request.prompt, request.prompt[-1])
            if state.faults.active("native_route_sequence_differs") and request.prompt
            else request.prompt
        )
        self._result = as_generated(
            worker, generate_choice(worker.model(), context, request.params, 0)
        )
        self._rid = request.rid or str(uuid.uuid4())
        self._return_logprob = request.return_logprob
        self._top_n = request.top_n
        self._cached_tokens = cached_tokens
        self._versions: list[Any] = []
        """The worker's version when each output token was released."""
        self._renames_seen = worker.runtime.paused_renames
        result = self._result
        self._selected = reported_selected(state, result.logprobs)
        drop = state.faults.active("topk_missing_selected")
        self._output_tops = [
            _triples(worker_alternatives(s, drop_sampled=True) if drop else s.top)
            for s in result.steps
        ]
        start = request.start
        self._with_input = start >= 0  # logprob_start_len -1: no input logprobs at all
        self._input, self._input_top = self._input_logprobs(start) if start >= 0 else ([], [])

    def _current_version(self) -> Any:
        worker = self._worker
        version, declared = worker.sample_version()
        return version if declared else DEFAULT_WEIGHT_VERSION

    def _spans(self, upto: int) -> list[dict[str, Any]]:
        versions = self._versions[:upto]
        if self._state.faults.active("weight_versions_span_collapsed") and versions:
            return [{"version": self._current_version(), "start": 0, "end": len(versions)}]
        spans: list[dict[str, Any]] = []
        for index, version in enumerate(versions):
            if spans and spans[-1]["version"] == version:
                spans[-1]["end"] = index + 1
            else:
                spans.append({"version": version, "start": index, "end": index + 1})
        return spans

    def _record_version(self) -> None:
        """The current version for the token just released (``paused_rename_restamps_tokens``:
        a version renamed while the request was paused is written over every token before it
        too, the version at completion instead of at generation)."""
        current = self._current_version()
        renames = self._worker.runtime.paused_renames
        if renames != self._renames_seen and self._state.faults.active(PAUSED_RENAME_RESTAMPS):
            self._versions = [current] * len(self._versions)
        self._renames_seen = renames
        recorded = self._worker.scheduler_version
        self._versions.append(current if recorded is None else recorded)

    @property
    def token_count(self) -> int:
        return len(self._result.steps)

    def _input_logprobs(self, start: int) -> tuple[list[Triple], list[list[Triple] | None]]:
        model = self._worker.model()
        scored = score_prompt(model, self._prompt, self._top_n)
        later = scored[start + 1 :]
        values: list[float | None] = [None, *(p.logprob if p else None for p in later)]
        tops: list[list[Triple] | None] = [None, *(_triples(p.top) if p else None for p in later)]
        ids = self._prompt[start:]
        values = values[: len(ids)]
        tops = tops[: len(ids)]
        if values and self._state.faults.active("prompt_logprobs_shifted_by_one"):
            values = [None, *values[:-1]]
            tops = [None, *tops[:-1]]
        if self._state.faults.active("prompt_logprobs_leading_null_dropped"):
            values, tops, ids = values[1:], tops[1:], ids[1:]
        if values and self._state.faults.active("sglang_input_logprob_first_not_null"):
            context = model.context(self._prompt[: len(self._prompt) - len(ids)])
            values[0] = model.distribution(context, 0, include_eos=True).logprob(ids[0])
        return [[v, t, None] for v, t in zip(values, ids, strict=True)], tops

    def _finish_reason(self, *, aborted: bool) -> dict[str, Any] | None:
        if self._state.faults.active("finish_reason_missing"):
            return None
        if self._state.faults.active("unknown_finish_reason"):
            return {"type": "weird_reason"}
        if aborted:
            return dict(ABORT_FINISH)
        if self._result.finish == "length":
            return {"type": "length", "length": len(self._result.steps)}
        return {"type": "stop", "matched": self._result.stop_reason}

    def event(self, upto: int, *, final: bool, aborted: bool = False) -> dict[str, Any]:
        """The cumulative event after ``upto`` generated tokens."""
        steps = self._result.steps[:upto]
        ids = [s.token_id for s in steps]
        count = len(ids) + (1 if self._state.faults.active("usage_counts_wrong") else 0)
        spans = self._spans(upto)
        meta: dict[str, Any] = {
            "id": self._rid,
            "finish_reason": self._finish_reason(aborted=aborted) if final else None,
            "prompt_tokens": len(self._prompt),
            "completion_tokens": count,
            "cached_tokens": self._cached_tokens,
            # SGLang's scalar is its newest span's (`add_weight_versions_to_meta_info`): a
            # version published after the last token released names none of them
            "weight_version": (
                spans[-1]["version"]
                if spans and self._worker.scheduler_version is None
                else self._current_version()
            ),
            "weight_versions": spans,
        }
        if self._return_logprob:
            shift = 1 if self._state.faults.active("sglang_output_logprob_id_mismatch") else 0
            if self._with_input:
                meta["input_token_logprobs"] = self._input
            meta["output_token_logprobs"] = [
                [value, token + shift, None]
                for value, token in zip(self._selected[:upto], ids, strict=False)
            ]
            if self._top_n > 0:
                if self._with_input:
                    meta["input_top_logprobs"] = self._input_top
                meta["output_top_logprobs"] = self._output_tops[:upto]
        if final and not aborted and self._state.faults.active("stream_ids_differ"):
            ids = ids[:-1]
        return {"text": "".join(s.text_delta for s in steps), "output_ids": ids, "meta_info": meta}

    async def frames(self, live: LiveRequest) -> AsyncIterator[bytes]:
        total = len(self._result.steps)
        if self._state.faults.active("stream_truncated"):
            if await live.step():
                self._versions.append(self._current_version())
                live.end("completed")
                yield frame(self.event(1, final=False))
            return
        for upto in range(1, total + 1):
            if not await live.step():
                live.end("aborted")
                yield frame(self.event(upto - 1, final=True, aborted=True))
                if not self._state.faults.active("done_missing"):
                    yield DONE_FRAME
                return
            self._record_version()
            yield frame(self.event(upto, final=upto == total))
        live.end("completed", [s.token_id for s in self._result.steps])
        last = self.event(total, final=True)
        if self._state.faults.active("double_terminal"):
            yield frame(last)
        if self._state.faults.active("content_after_terminal"):
            extra = self.event(total, final=False)
            extra["text"] += TRAILING_TEXT
            yield frame(extra)
        if not self._state.faults.active("done_missing"):
            yield DONE_FRAME


def parse_sglang_request(body: Any, *, wrap_ids: bool = False) -> SglangRequest:
    """Validate a native /generate body (stream only: non-stream is a 501)."""
    if not isinstance(body, Mapping):
        raise _bad_request("invalid type: expected a JSON object")
    prompt = _prompt(body, wrap_ids=wrap_ids)
    return_logprob = body.get("return_logprob", False)
    if not isinstance(return_logprob, bool):
        raise _bad_request("return_logprob: invalid type, expected a boolean")
    start = body.get("logprob_start_len", -1)
    if not _is_int(start) or start < -1:
        raise _bad_request("logprob_start_len: invalid value, expected an integer >= -1")
    if start > len(prompt):
        raise _bad_request(
            f"logprob_start_len ({start}) is longer than the prompt ({len(prompt)} tokens)"
        )
    top_n = _int(body, "top_logprobs_num", 0, 0)
    rid = body.get("rid")
    if rid is not None and not isinstance(rid, str):
        raise _bad_request("rid: invalid type, expected a string")
    params = _sampling(body.get("sampling_params"), top_n if return_logprob else None)
    if body.get("stream") is not True:
        raise FrontendError(
            501, SGLANG_NON_STREAM_MESSAGE, body={"error": {"message": SGLANG_NON_STREAM_MESSAGE}}
        )
    return SglangRequest(
        prompt=prompt,
        params=params,
        rid=rid,
        return_logprob=return_logprob,
        start=start if return_logprob else -1,
        top_n=top_n,
    )
