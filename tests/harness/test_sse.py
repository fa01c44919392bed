from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rl_conformance.sse import SSEDecodeError, SSEEvent, SSEParser

TRANSCRIPT = (
    ": keep-alive comment\r\n"
    "event: annotation\r\n"
    "id: 7\r\n"
    'data: {"a": 1}\r\n'
    "\r\n"
    'data: {"text": "héllo"}\n'
    "\n"
    "data: line one\r"
    "data: line two\r"
    "\r"
    "data: [DONE]\n\n"
)
EXPECTED = [
    SSEEvent(data='{"a": 1}', event="annotation", id="7"),
    SSEEvent(data='{"text": "héllo"}', id="7"),
    SSEEvent(data="line one\nline two", id="7"),
    SSEEvent(data="[DONE]", id="7"),
]


def parse_in_pieces(raw: bytes, cuts: list[int]) -> tuple[list[SSEEvent], SSEParser]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    start = 0
    for cut in [*sorted(cuts), len(raw)]:
        events += parser.feed(raw[start:cut])
        start = cut
    events += parser.close()
    return events, parser


def test_whole_transcript_parses_with_crlf_cr_lf_comments_and_fields() -> None:
    events, parser = parse_in_pieces(TRANSCRIPT.encode(), [])
    assert events == EXPECTED
    assert parser.comments == 1
    assert not parser.truncated


@given(st.lists(st.integers(min_value=0, max_value=len(TRANSCRIPT.encode())), max_size=12))
def test_events_split_anywhere_across_chunks_parse_identically(cuts: list[int]) -> None:
    events, parser = parse_in_pieces(TRANSCRIPT.encode(), cuts)
    assert events == EXPECTED
    assert not parser.truncated


def test_stream_ending_inside_an_event_is_truncated() -> None:
    events, parser = parse_in_pieces(b'data: {"a": 1}\n\ndata: {"b":', [])
    assert events == [SSEEvent(data='{"a": 1}')]
    assert parser.truncated


def test_invalid_utf8_is_reported() -> None:
    with pytest.raises(SSEDecodeError):
        SSEParser().feed(b"data: \xff\xfe\n\n")


def test_field_without_space_and_unknown_fields() -> None:
    events, _ = parse_in_pieces(b"data:x\nfoo: bar\nretry: 10\n\n", [])
    assert events == [SSEEvent(data="x", retry=10)]


def test_crlf_split_around_an_empty_chunk_is_one_line_break() -> None:
    parser = SSEParser()
    events = parser.feed(b"data: a\r") + parser.feed(b"") + parser.feed(b"\ndata: b\r\n\r\n")
    assert events == [SSEEvent(data="a\nb")]
