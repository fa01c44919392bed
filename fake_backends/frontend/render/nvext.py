"""The response ``nvext`` object: which selected fields appear on which chunk.

Placement follows Dynamo (CONTRACT-NOTES §U3.2, §O4.3): one object at the response or chunk
top level, never inside choices; every stream chunk carries that chunk's
``completion_token_ids``; the finish chunk of a choice carries ``prompt_token_ids``,
``engine_data``, ``prompt_logprobs``, ``stop_reason``, ``detailed_finish_reason`` and
``timing``; fields requested but unavailable are absent; an empty object is omitted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fake_backends.encoding.json_text import f32_widened
from fake_backends.frontend.render.logprobs import vllm_prompt_logprobs
from fake_backends.frontend.runs import EngineRun
from fake_backends.frontend.views import (
    ChoiceView,
    last_finished,
    reported_completion_ids,
    reported_prompt_ids,
    reported_prompt_positions,
)
from fake_backends.runtime.state import DeploymentState


class NvextComposer:
    """Builds the nvext of every chunk (or of the whole response) of one request."""

    def __init__(self, state: DeploymentState, run: EngineRun) -> None:
        self._state = state
        self._run = run
        self._nvext = run.request.nvext
        self._first_token_ms: float | None = None
        # Whether a chunk that finishes nothing can carry anything (most streams: no).
        self.on_every_chunk = self._wants("worker_id") or self._wants("completion_token_ids")

    def _wants(self, selector: str) -> bool:
        return self._nvext.wants(selector)

    def mark_first_token(self) -> None:
        if self._first_token_ms is None:
            self._first_token_ms = self._run.received.elapsed_ms()

    def _worker_id(self) -> dict[str, int]:
        # Aggregated serving: prefill and decode ran on the same worker (recorded shape).
        instance = self._run.worker.instance_id
        return {"prefill_worker_id": instance, "decode_worker_id": instance}

    def _positions(self) -> list[Any] | None:
        scores = self._run.prompt_scores
        return None if scores is None else reported_prompt_positions(self._state, scores)

    def _engine_data(self, view: ChoiceView) -> dict[str, Any]:
        """vLLM's engine data, forwarded verbatim by the frontend (worker f64 values).

        Keys in the order Dynamo's vLLM worker writes them (real vLLM 0.31.0,
        ``fixtures/dynamo-1.6.1/vllm-cpu/completions_rl_fields.json``): ``prompt_token_ids``,
        ``kv_cache_hit`` (single-choice requests only), ``prompt_logprobs`` when asked,
        ``completion_token_ids``, ``finished``, ``completion_logprobs`` when asked. The
        fake adds ``weight_version``, which real vLLM does not send (fixtures/KNOWN_DIFFERENCES.md).
        """
        raw_ids = list(view.result.token_ids)
        if self._state.faults.active("engine_data_ids_differ") and raw_ids:
            raw_ids[-1] += 1
        prompt_ids = list(self._run.request.prompt_ids)
        data: dict[str, Any] = {"prompt_token_ids": prompt_ids}
        if self._state.personality.name == "vllm" and self._run.request.n == 1:
            data["kv_cache_hit"] = {
                "prompt_tokens": len(prompt_ids),
                "reused_tokens": self._run.cached_tokens,
            }
        positions = self._positions()
        if positions is not None:
            data["prompt_logprobs"] = vllm_prompt_logprobs(positions, float)
        data["completion_token_ids"] = raw_ids
        data["finished"] = True
        if view.selected is not None:
            data["completion_logprobs"] = list(view.selected)
        # The version of the weights that produced these tokens, not the worker's current
        # one: a request held across an update was generated after it.
        data["weight_version"] = (
            "never-applied-weights"
            if self._state.faults.active("weight_version_misreported")
            else self._run.weight_version
        )
        return data

    def prompt_logprobs(self, number: Callable[[float], float] = f32_widened) -> list[Any] | None:
        positions = self._positions()
        return None if positions is None else vllm_prompt_logprobs(positions, number)

    def _timing(self) -> dict[str, Any]:
        self.mark_first_token()
        assert self._first_token_ms is not None
        return {
            "request_received_ms": self._run.received.epoch_ms,
            "prefill_wait_time_ms": 0.0,
            "prefill_time_ms": self._first_token_ms,
            "ttft_ms": self._first_token_ms,
            "total_time_ms": self._run.received.elapsed_ms(),
        }

    def _compose(
        self, ids: list[int] | None, finished: ChoiceView | None, *, with_ids: bool
    ) -> dict[str, Any] | None:
        """One nvext object, keys in the order the real frontend writes them."""
        out: dict[str, Any] = {}
        if self._wants("worker_id"):
            out["worker_id"] = self._worker_id()
        if with_ids and ids is not None:
            out["completion_token_ids"] = ids
        if finished is not None:
            if self._wants("timing"):
                out["timing"] = self._timing()
            # A stop string is matched by the frontend, which then drops the engine's final
            # output and its engine_data (real vLLM: vllm-cpu/completions_stop_string.json).
            by_stop_string = isinstance(finished.result.stop_reason, str)
            if self._wants("engine_data") and not by_stop_string:
                out["engine_data"] = self._engine_data(finished)
            if self._wants("stop_reason") and finished.result.stop_reason is not None:
                out["stop_reason"] = finished.result.stop_reason
            if self._wants("detailed_finish_reason"):
                out["detailed_finish_reason"] = (
                    "cancelled"
                    if self._state.faults.active("silent_cancellation")
                    else finished.detailed_finish_reason
                )
            if self._wants("prompt_token_ids"):
                prompt_ids = reported_prompt_ids(self._state, self._run.request.prompt_ids)
                if prompt_ids is not None:
                    out["prompt_token_ids"] = prompt_ids
            if self._wants("prompt_logprobs"):
                prompt = self.prompt_logprobs()
                if prompt is not None:
                    out["prompt_logprobs"] = prompt
        return out or None

    def for_chunk(
        self, view: ChoiceView, position: int, *, terminal: bool
    ) -> dict[str, Any] | None:
        """nvext of the stream chunk carrying token ``position`` of a choice."""
        self.mark_first_token()
        if not (terminal or self.on_every_chunk):
            return None
        dropped = terminal and self._state.faults.active("stream_ids_differ")
        step = view.result.steps[position]
        ids = reported_completion_ids(self._state, [step.token_id], step.text_delta)
        with_ids = self._wants("completion_token_ids") and not dropped
        return self._compose(ids, view if terminal else None, with_ids=with_ids)

    def for_cancel(self, view: ChoiceView) -> dict[str, Any] | None:
        """nvext of the token-less chunk that ends an aborted choice: its ids are ``[]`` (real
        vLLM, ``vllm-cpu/stream_during_pause_abort_all_selectors.json``)."""
        self.mark_first_token()
        return self._compose([], view, with_ids=self._wants("completion_token_ids"))

    def for_response(self, views: Sequence[ChoiceView]) -> dict[str, Any] | None:
        """nvext of a non-streaming response: ids concatenated, the rest from the last finisher."""
        self.mark_first_token()
        ids: list[int] | None = []
        for view in views:
            got = reported_completion_ids(self._state, view.result.token_ids, view.result.text)
            if got is None or ids is None:
                ids = None
                continue
            ids.extend(got)
        finished = last_finished(views) if views else None
        return self._compose(ids, finished, with_ids=self._wants("completion_token_ids"))
