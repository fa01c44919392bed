from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rl_conformance.wire.sse import SSEDecodeError, SSEEvent, SSEParser

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


def reference_events(text: str) -> tuple[list[SSEEvent], bool]:
    """The stream read whole, line by line, as the WHATWG algorithm states it."""
    events: list[SSEEvent] = []
    data: list[str] = []
    event_type, last_id, retry, has_fields = "", None, None, False
    position = 0
    while True:
        breaks = [(text.find(mark, position), mark) for mark in ("\r\n", "\n", "\r")]
        found = [(at, -len(mark), mark) for at, mark in breaks if at >= 0]
        if not found:
            break
        at, _, mark = min(found)
        line, position = text[position:at], at + len(mark)
        if line == "":
            if data:
                events.append(SSEEvent("\n".join(data), event_type or "message", last_id, retry))
            data, event_type, has_fields = [], "", False
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        value = value[1:] if sep and value.startswith(" ") else value
        has_fields = True
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value.isdigit():
            retry = int(value)
    return events, bool(text[position:]) or has_fields


LINES = st.sampled_from(
    ['data: {"a": 1}', "data:x", "data", "data: é日", "event: e", "id: 3", "retry: 5", ": c", ""]
)


@given(
    lines=st.lists(st.tuples(LINES, st.sampled_from(["\n", "\r", "\r\n"])), max_size=14),
    ending=st.sampled_from(["", "\n", "\n\n", "data: cut"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_any_stream_in_any_pieces_parses_as_the_whole_stream_read_line_by_line(
    lines: list[tuple[str, str]], ending: str, cuts: list[int]
) -> None:
    text = "".join(line + mark for line, mark in lines) + ending
    raw = text.encode()
    events, parser = parse_in_pieces(raw, [cut for cut in cuts if cut <= len(raw)])
    expected, truncated = reference_events(text)
    assert events == expected
    assert parser.truncated == truncated
    byte_by_byte, parser = parse_in_pieces(raw, list(range(len(raw))))
    assert byte_by_byte == expected
    assert parser.truncated == truncated


def test_a_long_line_in_many_pieces_is_joined_once() -> None:
    parser = SSEParser()
    for _ in range(1000):
        assert parser.feed(b"x" * 1000) == []
    assert parser.feed(b"\n\n") == []  # a line that is no field ("xxx...") dispatches nothing
    assert parser.feed(b"data: " + b"y" * 5000 + b"\n\n") == [SSEEvent(data="y" * 5000)]
