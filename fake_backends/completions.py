"""``/v1/completions`` responses: the non-streaming body and the stream chunks.

Key sets follow the recordings of the real 1.6.1 frontend: ``system_fingerprint: null``
on bodies and chunks, ``usage: null`` on every stream chunk but the usage chunk, a
choice's ``logprobs`` key only when logprobs were requested, and ``finish_reason`` only on
the chunk that finishes a choice.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from fake_backends.engine import EngineRun
from fake_backends.logprob_render import completion_logprobs
from fake_backends.response_nvext import NvextComposer
from fake_backends.sse import sse_response
from fake_backends.state import DeploymentState
from fake_backends.streaming import TRAILING_TEXT, stream_frames
from fake_backends.usage import usage
from fake_backends.views import ChoiceView, choice_view
from fake_backends.wire import json_response

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


class _CompletionChunks:
    def __init__(self, state: DeploymentState, run: EngineRun, views: list[ChoiceView]) -> None:
        self._state = state
        self._run = run
        self._views = views
        self._nvext = NvextComposer(state, run)

    def token_chunk(self, view: ChoiceView, position: int, *, terminal: bool) -> dict[str, Any]:
        step = view.result.steps[position]
        choice: dict[str, Any] = {"text": step.text_delta, "index": view.index}
        if view.selected is not None:
            choice["logprobs"] = completion_logprobs(view, [position])
        if terminal:
            choice["finish_reason"] = view.finish_reason
        chunk = _envelope(self._state, self._run, [choice])
        chunk["usage"] = None
        nvext = self._nvext.for_chunk(view, position, terminal=terminal)
        if nvext is not None:
            chunk["nvext"] = nvext
        return chunk

    def trailing_chunk(self, view: ChoiceView) -> dict[str, Any]:
        chunk = _envelope(self._state, self._run, [{"text": TRAILING_TEXT, "index": view.index}])
        chunk["usage"] = None
        return chunk

    def usage_chunk(self) -> dict[str, Any]:
        chunk = _envelope(self._state, self._run, [])
        chunk["usage"] = usage(self._state, len(self._run.request.prompt_ids), self._views)
        return chunk


def _choice(view: ChoiceView) -> dict[str, Any]:
    choice: dict[str, Any] = {"text": view.result.text, "index": view.index}
    if view.selected is not None:
        choice["logprobs"] = completion_logprobs(view, range(len(view.result.steps)))
    choice["finish_reason"] = view.finish_reason
    return choice


def completion_response(state: DeploymentState, run: EngineRun) -> Response:
    views = [choice_view(state, c, run.request.logprobs) for c in run.choices]
    if run.request.stream:
        chunks = _CompletionChunks(state, run, views)
        frames = stream_frames(state, views, chunks, include_usage=run.request.include_usage)
        return sse_response(frames)
    body = _envelope(state, run, [_choice(v) for v in views])
    body["usage"] = usage(state, len(run.request.prompt_ids), views)
    nvext = NvextComposer(state, run).for_response(views)
    if nvext is not None:
        body["nvext"] = nvext
    return json_response(body)
