"""What the two OpenAI stream dialects share: a token's chunk, and its frame written fast."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from fake_backends.encoding.sse_frames import TextFrames, frame
from fake_backends.frontend.render.nvext import NvextComposer
from fake_backends.frontend.runs import EngineRun
from fake_backends.frontend.views import ChoiceView
from fake_backends.runtime.state import DeploymentState


class TokenChunks:
    """The token chunks of one streamed run; a dialect supplies ``_token_chunk`` (the chunk for
    a token with a given text) and ``_plain_key`` (what, besides the text, sets a plain chunk
    apart from its choice's other plain chunks)."""

    def __init__(self, state: DeploymentState, run: EngineRun) -> None:
        self._state = state
        self._run = run
        self._nvext = NvextComposer(state, run)
        self._text_frames = TextFrames()

    def token_chunk(self, view: ChoiceView, position: int, *, terminal: bool) -> dict[str, Any]:
        text = view.result.steps[position].text_delta
        return self._token_chunk(view, position, text, terminal=terminal)

    def token_frame(self, view: ChoiceView, position: int, *, terminal: bool) -> bytes:
        """``frame(token_chunk(...))``: a plain chunk (not the choice's last, with text, no
        logprobs, nothing per chunk in nvext) from a template around its text, any other in
        full."""
        text = view.result.steps[position].text_delta
        if terminal or not text or view.selected is not None or self._nvext.on_every_chunk:
            return frame(self._token_chunk(view, position, text, terminal=terminal))
        self._nvext.mark_first_token()
        return self._text_frames.frame(
            (self._plain_key(view, position), self._state.reported_model()),
            text,
            lambda t: self._token_chunk(view, position, t, terminal=False),
        )

    def _token_chunk(
        self, view: ChoiceView, position: int, text: str, *, terminal: bool
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _plain_key(self, view: ChoiceView, position: int) -> Hashable:
        raise NotImplementedError
