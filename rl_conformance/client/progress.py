"""How far a running stream has come, told to another thread as it runs."""

from __future__ import annotations

import threading


class StreamProgress:
    """How far a running stream has come, for a thread that acts while it runs (a control step
    taken with a stream in flight): events and completion token ids received so far, whether it
    ended, and a wait for either that needs no polling. Evidence, not timing: a test states
    what the stream had delivered when its step was sent and answered."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.events = 0
        self.tokens = 0
        self.ended = False
        self.first_event: str | None = None
        """The first data event as received (what a test acting mid-stream may need of it: the
        worker it names)."""

    def advance(self, events: int, tokens: int, first: str | None = None) -> None:
        with self._changed:
            self.events, self.tokens = events, tokens
            if first is not None and self.first_event is None:
                self.first_event = first
            self._changed.notify_all()

    def end(self) -> None:
        with self._changed:
            self.ended = True
            self._changed.notify_all()

    def snapshot(self) -> tuple[int, bool]:
        """(tokens received, ended) read together."""
        with self._changed:
            return self.tokens, self.ended

    def counts(self) -> tuple[int, int, bool]:
        """(events received, tokens received, ended) read together."""
        with self._changed:
            return self.events, self.tokens, self.ended

    def wait_for_events(self, count: int, timeout_s: float) -> bool:
        """Until `count` data events arrived (True) or the stream ended or the time ran out."""
        with self._changed:
            self._changed.wait_for(lambda: self.events >= count or self.ended, timeout_s)
            return self.events >= count

    def wait_for_tokens(self, count: int, timeout_s: float) -> bool:
        """Until `count` tokens arrived (True) or the stream ended or the time ran out (False
        unless `count` was reached)."""
        with self._changed:
            self._changed.wait_for(lambda: self.tokens >= count or self.ended, timeout_s)
            return self.tokens >= count
