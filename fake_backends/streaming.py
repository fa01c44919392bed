"""The chunk sequence of an OpenAI-compatible stream, shared by completions and chat.

One generated token per chunk; choices interleave round-robin; a choice's last token
chunk carries its finish_reason (the engine reports the finish with the last token, so
the frontend sends both in one chunk, as recorded from 1.6.1); an optional usage chunk
precedes ``[DONE]``.  The stream-shape faults (duplicated or missing terminal, trailing
content, truncation, missing ``[DONE]``) are applied here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from fake_backends.sse import DONE_FRAME, frame
from fake_backends.state import DeploymentState
from fake_backends.views import ChoiceView, interleave


class StreamDialect(Protocol):
    """The per-endpoint chunk builders."""

    def token_chunk(self, view: ChoiceView, position: int, *, terminal: bool) -> dict[str, Any]: ...

    def trailing_chunk(self, view: ChoiceView) -> dict[str, Any]: ...

    def usage_chunk(self) -> dict[str, Any]: ...


TRAILING_TEXT = " after-the-end"


def stream_frames(
    state: DeploymentState,
    views: Sequence[ChoiceView],
    dialect: StreamDialect,
    *,
    include_usage: bool,
) -> Iterator[bytes]:
    for view, position in interleave(views):
        if state.fault("stream_truncated"):
            yield frame(dialect.token_chunk(view, position, terminal=False))
            return
        terminal = position == len(view.result.steps) - 1
        chunk = dialect.token_chunk(view, position, terminal=terminal)
        yield frame(chunk)
        if terminal and state.fault("double_terminal"):
            yield frame(chunk)
        if terminal and state.fault("content_after_terminal"):
            yield frame(dialect.trailing_chunk(view))
    if include_usage:
        yield frame(dialect.usage_chunk())
    if not state.fault("done_missing"):
        yield DONE_FRAME
