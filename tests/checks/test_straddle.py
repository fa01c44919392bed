"""A sample generated across an update: what its versions may and may not claim."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rl_conformance.checks import straddle

OLD, NEW = "step-1", "step-2"


def stream(versions: list[str], *, cumulative: bool = True) -> list[dict[str, Any]]:
    """A native SGLang stream of one token per event, each event naming `versions[i]`, with
    spans built from the same per-token versions."""
    events = []
    for index, version in enumerate(versions):
        spans: list[dict[str, Any]] = []
        for position, named in enumerate(versions[: index + 1]):
            if spans and spans[-1]["version"] == named:
                spans[-1]["end"] = position + 1
            else:
                spans.append({"version": named, "start": position, "end": position + 1})
        ids = list(range(100, 101 + index)) if cumulative else [100 + index]
        events.append(
            {
                "output_ids": ids,
                "meta_info": {"weight_version": version, "weight_versions": spans},
            }
        )
    return events


@given(
    tokens=st.integers(min_value=1, max_value=40),
    data=st.data(),
    cumulative=st.booleans(),
)
def test_a_true_trail_passes_wherever_the_new_version_begins(
    tokens: int, data: st.DataObject, cumulative: bool
) -> None:
    """The engine's pace decides where the new weights begin, at or after what was read before
    the update; every such trail is true, whether the straddle shows or not."""
    read = data.draw(st.integers(min_value=1, max_value=tokens))
    switch = data.draw(st.integers(min_value=read, max_value=tokens))
    versions = [OLD] * switch + [NEW] * (tokens - switch)
    trail = straddle.trail_from_native_events(stream(versions, cumulative=cumulative), read)
    assert trail.known_old == read
    assert trail.tokens == tokens
    result = straddle.straddle_reported(trail, OLD, NEW)
    assert result.passed, result.explain()
    assert (len(trail.versions_named()) > 1) == (switch < tokens)


@given(tokens=st.integers(min_value=2, max_value=40), data=st.data())
def test_new_weights_claimed_for_tokens_read_before_the_update_fail(
    tokens: int, data: st.DataObject
) -> None:
    read = data.draw(st.integers(min_value=1, max_value=tokens))
    events = stream([OLD] * read + [NEW] * (tokens - read))
    events[-1]["meta_info"]["weight_versions"] = [{"version": NEW, "start": 0, "end": tokens}]
    result = straddle.straddle_reported(straddle.trail_from_native_events(events, read), OLD, NEW)
    assert not result.passed
    assert "before the update was sent" in result.explain()


def test_spans_with_a_gap_or_short_of_the_output_fail() -> None:
    events = stream([OLD, OLD, NEW, NEW])
    events[-1]["meta_info"]["weight_versions"] = [
        {"version": OLD, "start": 0, "end": 2},
        {"version": NEW, "start": 3, "end": 4},
    ]
    gap = straddle.straddle_reported(straddle.trail_from_native_events(events, 1), OLD, NEW)
    assert "previous span ended at 2" in gap.explain()
    events[-1]["meta_info"]["weight_versions"] = [{"version": OLD, "start": 0, "end": 3}]
    short = straddle.straddle_reported(straddle.trail_from_native_events(events, 1), OLD, NEW)
    assert "cover 3 output tokens, the stream delivered 4" in short.explain()


def test_a_version_going_back_or_unknown_fails() -> None:
    back = straddle.trail_from_native_events(stream([OLD, NEW, OLD]), 1)
    assert "goes back" in straddle.straddle_reported(back, OLD, NEW).explain()
    other = straddle.trail_from_native_events(stream([OLD, "step-9"]), 1)
    assert "neither the version before" in straddle.straddle_reported(other, OLD, NEW).explain()


def test_a_stream_that_names_no_version_has_no_trail() -> None:
    trail = straddle.trail_from_native_events([{"output_ids": [1]}, {"output_ids": [1, 2]}], 1)
    assert not trail.names_versions
