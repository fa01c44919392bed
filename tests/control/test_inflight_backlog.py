"""A stream that ends while its worker is paused has not necessarily been generated while paused:
a loaded client reads late what the engine generated before the pause took hold. Tokens arriving
much faster than the stream ever generated are that backlog (`InFlightStream.outpaced`), and the
pause-default test then stays inconclusive instead of judging `none`."""

from __future__ import annotations

from rl_conformance.control.inflight import InFlightStream, Mark


def _stream(started_at: float, first: Mark | None = None) -> InFlightStream:
    stream = object.__new__(InFlightStream)
    stream.started_at = started_at
    stream.first = first
    return stream


def test_a_backlog_read_late_is_told_from_generation_during_the_pause() -> None:
    # Real vLLM 0.31 on CPU under a loaded full run: 69 tokens 1.2 s after the start, 330 when the
    # pause was answered, all 512 within the 0.6 s hold: 303 tokens/s against 57 before.
    stream = _stream(started_at=100.0)
    sent, answered = Mark(69, False, at=101.2), Mark(330, False, at=105.8)
    assert stream.outpaced(sent, answered, Mark(512, True, at=106.4))
    assert stream.maybe_read_late(sent, answered, Mark(512, True, at=106.4))


def test_a_pause_call_that_outlasts_the_rest_of_the_stream_leaves_it_unseen() -> None:
    # The toy engine behind real Dynamo, loaded: 194 tokens when the pause was sent, 463 when it
    # was answered, the last 49 during the hold at the stream's own pace. The pause may have
    # landed after the engine's last token.
    stream = _stream(started_at=100.0)
    sent, answered = Mark(194, False, at=100.4), Mark(463, False, at=101.0)
    end = Mark(512, True, at=101.5)
    assert not stream.outpaced(sent, answered, end)
    assert stream.maybe_read_late(sent, answered, end)


def test_a_pause_that_holds_nothing_keeps_the_streams_own_pace() -> None:
    # A worker that ignores the pause: its tokens keep coming at the pace they came before.
    stream = _stream(started_at=100.0)
    sent, answered = Mark(60, False, at=101.0), Mark(62, False, at=101.03)
    assert not stream.maybe_read_late(sent, answered, Mark(512, True, at=108.5))


def test_a_slow_first_token_does_not_make_an_unpaused_streams_pace_a_backlog() -> None:
    """The fake on a loaded machine (the kill matrix's shards): its first token 60 ms after the
    stream was sent, then about 840 tokens/s. Paced from the start alone (4 tokens in 60 ms),
    an unpaused stream's ordinary pace after the answer reads as a backlog; once the stream
    decoded for as long as its first token took (`show_pace`), its own pace is the baseline."""
    first = Mark(1, False, at=100.06)
    at_first = Mark(4, False, at=100.065)  # the pause sent as soon as the first token came
    assert _stream(100.0).outpaced(at_first, Mark(24, False, at=100.09), Mark(512, True, 100.66))
    sent, answered = Mark(60, False, at=100.13), Mark(80, False, at=100.15)
    end = Mark(512, True, at=100.67)
    assert not _stream(100.0, first).outpaced(sent, answered, end)
    assert not _stream(100.0, first).maybe_read_late(sent, answered, end)


def test_a_decoding_pace_read_over_too_short_a_window_is_not_trusted() -> None:
    """A handful of tokens read together right after the first (a burst, not a pace) leave the
    baseline the stream's pace since it was sent."""
    first = Mark(1, False, at=100.5)
    sent, answered = Mark(12, False, at=100.51), Mark(14, False, at=100.53)
    end = Mark(512, True, at=101.0)
    assert _stream(100.0, first).outpaced(sent, answered, end)
