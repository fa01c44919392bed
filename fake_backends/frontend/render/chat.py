"""``/v1/chat/completions`` responses: the non-streaming body and the stream chunks.

Shapes follow the recordings of the real 1.6.1 frontend: messages and logprobs carry
``refusal: null``; a message without text has ``content: null`` and a delta without text no
``content`` (CONTRACT-NOTES §O6.21); chunks always carry ``finish_reason`` and ``logprobs``
(null when empty) and never ``usage`` except the usage chunk; a choice's first chunk carries
the role together with its first content (there is no role-only chunk unless the first token
shows no text).

Prompt logprobs differ from completions (CONTRACT-NOTES §O6.5): a non-streaming response carries
a top-level ``prompt_logprobs`` whenever they were requested, without any nvext opt-in; a
stream only carries them in ``nvext`` with the opt-in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any

from fake_backends.encoding.json_text import f32_shortest
from fake_backends.frontend.flow import LiveRequest
from fake_backends.frontend.render.logprobs import chat_logprob_content
from fake_backends.frontend.render.nvext import NvextComposer
from fake_backends.frontend.render.token_chunks import TokenChunks
from fake_backends.frontend.runs import EngineRun
from fake_backends.frontend.streaming import TRAILING_TEXT, stream_frames
from fake_backends.frontend.usage import usage
from fake_backends.frontend.views import ChoiceView, choice_view
from fake_backends.runtime.state import DeploymentState

OBJECT = "chat.completion"
CHUNK_OBJECT = "chat.completion.chunk"


def _envelope(
    state: DeploymentState, run: EngineRun, choices: list[dict[str, Any]], obj: str
) -> dict[str, Any]:
    return {
        "id": run.response_id,
        "choices": choices,
        "created": run.created,
        "model": state.reported_model(),
        "object": obj,
    }


def _logprobs(view: ChoiceView, positions: range | list[int]) -> dict[str, Any] | None:
    if view.selected is None:
        return None
    return {"content": chat_logprob_content(view, positions), "refusal": None}


def _usage(state: DeploymentState, run: EngineRun, views: Sequence[ChoiceView]) -> dict[str, Any]:
    return usage(
        state, len(run.request.prompt_ids), views, cached_tokens=run.cached_tokens, endpoint="chat"
    )


def _delta(text: str, *, first: bool) -> dict[str, Any]:
    """A chunk's delta: `content` only when there is text (a chunk whose token shows none, a
    stop string cut at the first token, carries the role alone or nothing: real 1.6.1)."""
    delta: dict[str, Any] = {"content": text} if text else {}
    if first:
        delta["role"] = "assistant"
    return delta


class _ChatChunks(TokenChunks):
    def _plain_key(self, view: ChoiceView, position: int) -> Hashable:
        return view.index, position == 0  # the first chunk also carries the role

    def _token_chunk(
        self, view: ChoiceView, position: int, text: str, *, terminal: bool
    ) -> dict[str, Any]:
        delta = _delta(text, first=position == 0)
        choice = {
            "index": view.index,
            "delta": delta,
            "finish_reason": view.finish_reason if terminal else None,
            "logprobs": _logprobs(view, [position]),
        }
        chunk = _envelope(self._state, self._run, [choice], CHUNK_OBJECT)
        nvext = self._nvext.for_chunk(view, position, terminal=terminal)
        if nvext is not None:
            chunk["nvext"] = nvext
        return chunk

    def cancel_chunk(self, view: ChoiceView) -> dict[str, Any]:
        delta = _delta("", first=not view.result.steps)
        choice = {
            "index": view.index,
            "delta": delta,
            "finish_reason": view.finish_reason,
            "logprobs": _logprobs(view, []),
        }
        chunk = _envelope(self._state, self._run, [choice], CHUNK_OBJECT)
        nvext = self._nvext.for_cancel(view)
        if nvext is not None:
            chunk["nvext"] = nvext
        return chunk

    def trailing_chunk(self, view: ChoiceView) -> dict[str, Any]:
        choice = {
            "index": view.index,
            "delta": {"content": TRAILING_TEXT},
            "finish_reason": None,
            "logprobs": None,
        }
        return _envelope(self._state, self._run, [choice], CHUNK_OBJECT)

    def usage_chunk(self, views: Sequence[ChoiceView]) -> dict[str, Any]:
        chunk = _envelope(self._state, self._run, [], CHUNK_OBJECT)
        chunk["usage"] = _usage(self._state, self._run, views)
        return chunk


def _choice(view: ChoiceView) -> dict[str, Any]:
    return {
        "index": view.index,
        "message": {"content": view.result.text or None, "refusal": None, "role": "assistant"},
        "finish_reason": view.finish_reason,
        "logprobs": _logprobs(view, range(len(view.result.steps))),
    }


def chat_views(state: DeploymentState, run: EngineRun) -> list[ChoiceView]:
    views = [
        choice_view(state, c, run.request.logprobs, tokens_as_ids=run.request.tokens_as_ids)
        for c in run.choices
    ]
    if state.faults.active("chat_top_logprobs_short"):
        return [dataclasses.replace(v, tops=tuple(top[:-1] for top in v.tops)) for v in views]
    return views


def chat_stream(state: DeploymentState, run: EngineRun, live: LiveRequest) -> AsyncIterator[bytes]:
    """The SSE frames of a streaming chat completion, released token by token."""
    views = chat_views(state, run)
    chunks = _ChatChunks(state, run)
    return stream_frames(state, live, views, chunks, include_usage=run.request.include_usage)


def chat_body(state: DeploymentState, run: EngineRun) -> dict[str, Any]:
    """The non-streaming body of a (possibly truncated) run."""
    views = chat_views(state, run)
    composer = NvextComposer(state, run)
    body = _envelope(state, run, [_choice(v) for v in views], OBJECT)
    body["usage"] = _usage(state, run, views)
    prompt_logprobs = composer.prompt_logprobs(f32_shortest)
    if prompt_logprobs is not None:
        body["prompt_logprobs"] = prompt_logprobs
    nvext = composer.for_response(views)
    if nvext is not None:
        body["nvext"] = nvext
    return body
