"""The chunk sequence of an OpenAI-compatible stream, shared by completions and chat.

One generated token per chunk, released through the request's ``LiveRequest`` (so a
paused worker really stops the stream and an abort really ends it); choices interleave
round-robin; a choice's last token chunk carries its finish_reason (the engine reports
the finish with the last token, so the frontend sends both in one chunk, as recorded from
1.6.1); an optional usage chunk precedes ``[DONE]``.

When the worker's process dies under the request, the frontend moves it to another worker
(``LiveRequest.migrated``) and the stream goes on where it stopped, unless
``migration_repeats_splice_token`` sends the last token before the splice again.

When the worker aborts the request, each unfinished choice gets one more chunk without
tokens that carries ``finish_reason: "stop"`` (``nvext.detailed_finish_reason:
"cancelled"``), and usage counts what was released.  The stream-shape faults (duplicated
or missing terminal, trailing content, truncation, missing ``[DONE]``) are applied here
and nowhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from fake_backends.encoding.sse_frames import DONE_FRAME, frame
from fake_backends.frontend.flow import LiveRequest
from fake_backends.frontend.views import ChoiceView, interleave, truncated_view
from fake_backends.runtime.state import DeploymentState

NAN = float("nan")
NAN_ACROSS_UPDATE = "logprobs_nan_across_update"


class StreamDialect(Protocol):
    """The per-endpoint chunk builders."""

    def token_frame(self, view: ChoiceView, position: int, *, terminal: bool) -> bytes:
        """The frame of the chunk carrying token ``position`` of a choice."""
        ...

    def cancel_chunk(self, view: ChoiceView) -> dict[str, Any]: ...

    def trailing_chunk(self, view: ChoiceView) -> dict[str, Any]: ...

    def usage_chunk(self, views: Sequence[ChoiceView]) -> dict[str, Any]: ...


TRAILING_TEXT = " after-the-end"
ENGINE_DIED = "engine died while generating; the worker is restarting it"
WORKER_GONE = {
    "message": "Service temporarily unavailable",
    "type": "service_unavailable",
    "code": 503,
}


def _engine_died(state: DeploymentState, live: LiveRequest) -> bool:
    """The request's engine crashed under it: its stream ends in an error event, no `[DONE]`
    (``crashed_stream_ends_clean``: as an abort does, with a terminal chunk)."""
    crashed = live.gen is not None and live.gen.crashed
    return crashed and not state.faults.active("crashed_stream_ends_clean")


def swapped(views: Sequence[ChoiceView]) -> list[ChoiceView]:
    """The choices under one another's indices: the first under the last's, and so on."""
    indices = [view.index for view in reversed(views)]
    return [
        dataclasses.replace(view, result=dataclasses.replace(view.result, index=index))
        for view, index in zip(views, indices, strict=True)
    ]


class _UpdateCrossing:
    """``logprobs_nan_across_update``: once the worker loaded new weights while the stream was
    in flight, every logprob it releases from then on is NaN, its ids still right (NeMo RL
    #2180: an update that overlaps generation)."""

    def __init__(self, state: DeploymentState, live: LiveRequest) -> None:
        self._on = state.faults.active(NAN_ACROSS_UPDATE)
        self._live = live
        self._start: int | None = None
        self._nan: dict[int, ChoiceView] = {}

    def view(self, view: ChoiceView, position: int) -> ChoiceView:
        worker = self._live.worker
        if not self._on or worker is None or view.selected is None:
            return view
        if self._start is None:
            self._start = worker.runtime.updates
        if view.index not in self._nan and worker.runtime.updates > self._start:
            selected = tuple(
                NAN if at >= position else value for at, value in enumerate(view.selected)
            )
            self._nan[view.index] = dataclasses.replace(view, selected=selected)
        return self._nan.get(view.index, view)


async def stream_frames(
    state: DeploymentState,
    live: LiveRequest,
    views: Sequence[ChoiceView],
    dialect: StreamDialect,
    *,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    """The stream's frames, those released between two turns of the event loop joined into one
    item (a burst of tokens leaves in one write, each token still in its own event)."""
    if state.faults.active("stream_index_swapped") and len(views) > 1:
        views = swapped(views)
    released = {view.index: 0 for view in views}
    aborted = False
    pending: list[bytes] = []
    crossed = _UpdateCrossing(state, live)
    for view, position in interleave(views):
        if not live.step_now():
            if pending:  # what was released leaves before the event loop turns
                yield b"".join(pending)
                pending.clear()
            while not await live.step():
                if not await live.migrated():
                    aborted = True
                    break
                if state.faults.active("migration_repeats_splice_token") and position > 0:
                    pending.append(dialect.token_frame(view, position - 1, terminal=False))
            if aborted:
                break
        released[view.index] += 1
        view = crossed.view(view, position)
        if state.faults.active("stream_truncated"):
            live.end("completed")
            pending.append(dialect.token_frame(view, position, terminal=False))
            yield b"".join(pending)
            return
        terminal = position == len(view.result.steps) - 1
        token_frame = dialect.token_frame(view, position, terminal=terminal)
        pending.append(token_frame)
        if terminal and state.faults.active("double_terminal"):
            pending.append(token_frame)
        if terminal and state.faults.active("content_after_terminal"):
            pending.append(frame(dialect.trailing_chunk(view)))
    final = list(views)
    if aborted and live.gen is not None and live.gen.worker_died:
        # Recorded from Dynamo 1.6.1 with its worker SIGKILLed and no migration: an error
        # event, then [DONE] (toy-worker/worker_killed_stream_without_migration.json).
        live.end("aborted")
        pending.append(frame({"error": WORKER_GONE}))
        pending.append(DONE_FRAME)
        yield b"".join(pending)
        return
    if aborted and _engine_died(state, live):
        live.end("aborted")
        pending.append(frame({"error": {"message": ENGINE_DIED, "code": 500}}))
        yield b"".join(pending)
        return
    if aborted and state.faults.active("abort_orphans_streams"):
        live.end("aborted")
        if pending:
            yield b"".join(pending)
        return
    if aborted:
        final = [truncated_view(state, v, released[v.index]) for v in views]
        live.end("aborted")
        for before, after in zip(views, final, strict=True):
            if after is not before:
                pending.append(frame(dialect.cancel_chunk(after)))
    else:
        live.end("completed", views[0].result.token_ids if views else ())
    if include_usage:
        usage_chunk = dialect.usage_chunk(final)
        if state.faults.active("usage_chunk_miscounts"):
            usage_chunk["usage"]["completion_tokens"] += 1
            usage_chunk["usage"]["total_tokens"] += 1
        pending.append(frame(usage_chunk))
    if not state.faults.active("done_missing"):
        pending.append(DONE_FRAME)
    if pending:
        yield b"".join(pending)
