"""``/v1/completions`` responses: the non-streaming body and the stream chunks.

Key sets follow the recordings of the real 1.6.1 frontend: ``system_fingerprint: null``
on bodies and chunks, ``usage: null`` on every stream chunk but the usage chunk, a
choice's ``logprobs`` key only when logprobs were requested, and ``finish_reason`` only on
the chunk that finishes a choice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any

from fake_backends.frontend.flow import LiveRequest
from fake_backends.frontend.render.logprobs import completion_logprobs
from fake_backends.frontend.render.nvext import NvextComposer
from fake_backends.frontend.render.token_chunks import TokenChunks
from fake_backends.frontend.runs import EngineRun
from fake_backends.frontend.streaming import TRAILING_TEXT, stream_frames
from fake_backends.frontend.usage import usage
from fake_backends.frontend.views import ChoiceView, choice_view
from fake_backends.runtime.state import DeploymentState

OBJECT = "text_completion"


def _envelope(
    state: DeploymentState, run: EngineRun, choices: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "id": run.response_id,
        "choices": choices,
        "created": run.created,
        "model": state.reported_model(),
        "system_fingerprint": None,
        "object": OBJECT,
    }


def _usage(state: DeploymentState, run: EngineRun, views: Sequence[ChoiceView]) -> dict[str, Any]:
    return usage(
        state,
        len(run.request.prompt_ids),
        views,
        cached_tokens=run.cached_tokens,
        endpoint="completions",
    )


class _CompletionChunks(TokenChunks):
    def _plain_key(self, view: ChoiceView, position: int) -> Hashable:
        return view.index

    def _token_chunk(
        self, view: ChoiceView, position: int, text: str, *, terminal: bool
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"text": text, "index": view.index}
        if view.selected is not None:
            choice["logprobs"] = completion_logprobs(view, [position])
        if terminal:
            choice["finish_reason"] = view.finish_reason
            if self._state.faults.active("stop_reason_in_choices"):
                choice["stop_reason"] = view.result.stop_reason
        chunk = _envelope(self._state, self._run, [choice])
        chunk["usage"] = None
        nvext = self._nvext.for_chunk(view, position, terminal=terminal)
        if nvext is not None:
            chunk["nvext"] = nvext
        return chunk

    def cancel_chunk(self, view: ChoiceView) -> dict[str, Any]:
        choice: dict[str, Any] = {"text": "", "index": view.index}
        if view.selected is not None:
            choice["logprobs"] = completion_logprobs(view, [])
        choice["finish_reason"] = view.finish_reason
        chunk = _envelope(self._state, self._run, [choice])
        chunk["usage"] = None
        nvext = self._nvext.for_cancel(view)
        if nvext is not None:
            chunk["nvext"] = nvext
        return chunk

    def trailing_chunk(self, view: ChoiceView) -> dict[str, Any]:
        chunk = _envelope(self._state, self._run, [{"text": TRAILING_TEXT, "index": view.index}])
        chunk["usage"] = None
        return chunk

    def usage_chunk(self, views: Sequence[ChoiceView]) -> dict[str, Any]:
        chunk = _envelope(self._state, self._run, [])
        chunk["usage"] = _usage(self._state, self._run, views)
        return chunk


def _choice(view: ChoiceView) -> dict[str, Any]:
    choice: dict[str, Any] = {"text": view.result.text, "index": view.index}
    if view.selected is not None:
        choice["logprobs"] = completion_logprobs(view, range(len(view.result.steps)))
    choice["finish_reason"] = view.finish_reason
    return choice


def completion_views(state: DeploymentState, run: EngineRun) -> list[ChoiceView]:
    return [
        choice_view(state, c, run.request.logprobs, tokens_as_ids=run.request.tokens_as_ids)
        for c in run.choices
    ]


def completion_stream(
    state: DeploymentState, run: EngineRun, live: LiveRequest
) -> AsyncIterator[bytes]:
    """The SSE frames of a streaming completion, released token by token."""
    views = completion_views(state, run)
    chunks = _CompletionChunks(state, run)
    return stream_frames(state, live, views, chunks, include_usage=run.request.include_usage)


def completion_body(state: DeploymentState, run: EngineRun) -> dict[str, Any]:
    """The non-streaming body of a (possibly truncated) run."""
    views = completion_views(state, run)
    body = _envelope(state, run, [_choice(v) for v in views])
    if state.faults.active("stop_reason_in_choices"):
        for choice, view in zip(body["choices"], views, strict=True):
            choice["stop_reason"] = view.result.stop_reason
    body["usage"] = _usage(state, run, views)
    nvext = NvextComposer(state, run).for_response(views)
    if nvext is not None:
        body["nvext"] = nvext
    return body
