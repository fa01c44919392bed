"""A body or stream in a content coding the client asked for is read decoded, its caps count the
decoded bytes (a zip bomb stops at the cap, inflated no further), and a coding it did not ask for
is named, never read as the body."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterator

import httpx
import pytest

from rl_conformance.client.breaker import CircuitBreaker
from rl_conformance.client.codings import (
    ACCEPT_ENCODING,
    CodingError,
    Decoder,
    Encoder,
    decoder_for,
)
from rl_conformance.client.http import Client
from rl_conformance.wire.stream_state import StreamState

URL = "http://deployment.test/v1/completions"
BODY = {"object": "text_completion", "choices": [{"index": 0, "text": "hello" * 50}]}
EVENTS = [{"choices": [{"index": 0, "text": f"t{n}", "finish_reason": None}]} for n in range(20)]
EVENTS[-1]["choices"][0]["finish_reason"] = "length"


def sse(events: list[dict[str, object]]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + (
        b"data: [DONE]\n\n"
    )


def deflated(data: bytes) -> bytes:
    return zlib.compress(data)


def raw_deflated(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


Handler = Callable[[httpx.Request], httpx.Response]
PIECE = 4096


@pytest.fixture
def client_for() -> Iterator[Callable[..., Client]]:
    made: list[Client] = []

    def make(handler: Handler, **caps: int) -> Client:
        never = CircuitBreaker(threshold=0)
        client = Client(transport=httpx.MockTransport(handler), breaker=never, **caps)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def coded(body: bytes, coding: str, kind: str = "application/json") -> Handler:
    """Answers `body` as sent on the wire in `coding`, in pieces, as a network delivers it."""

    def pieces() -> Iterator[bytes]:
        for start in range(0, len(body), PIECE):
            yield body[start : start + PIECE]

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": kind, "content-encoding": coding}
        return httpx.Response(200, headers=headers, content=pieces())

    return handler


@pytest.mark.parametrize(
    ("coding", "encode"),
    [("gzip", gzip.compress), ("x-gzip", gzip.compress), ("deflate", deflated)],
)
def test_a_coded_json_body_is_read_decoded(
    client_for: Callable[..., Client], coding: str, encode: Callable[[bytes], bytes]
) -> None:
    exchange = client_for(coded(encode(json.dumps(BODY).encode()), coding)).post(URL, {})
    assert exchange.error is None
    assert exchange.json() == BODY


def test_a_raw_deflate_body_is_read_as_common_clients_read_it(
    client_for: Callable[..., Client],
) -> None:
    exchange = client_for(coded(raw_deflated(json.dumps(BODY).encode()), "deflate")).post(URL, {})
    assert exchange.json() == BODY


def test_every_request_asks_for_the_codings_the_client_reads(
    client_for: Callable[..., Client],
) -> None:
    seen: list[str] = []
    answer = coded(json.dumps(BODY).encode(), "identity")

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("accept-encoding", ""))
        return answer(request)

    client = client_for(handler)
    client.post(URL, {})
    client.stream("POST", URL, json_body={})
    assert seen == [ACCEPT_ENCODING, ACCEPT_ENCODING]


def test_a_gzipped_stream_is_parsed_decoded(client_for: Callable[..., Client]) -> None:
    handler = coded(gzip.compress(sse(EVENTS)), "gzip", "text/event-stream")
    exchange = client_for(handler).stream("POST", URL, json_body={})
    assert exchange.state is StreamState.SUCCESS, exchange.state_reason
    assert exchange.event_count == len(EVENTS) + 1
    assert exchange.stream_bytes == len(sse(EVENTS))


def test_a_zip_bomb_body_stops_at_the_decoded_cap(client_for: Callable[..., Client]) -> None:
    bomb = gzip.compress(b"0" * 50_000_000)  # 50 MB in about 50 kB
    exchange = client_for(coded(bomb, "gzip"), max_body_bytes=1_000_000).post(URL, {})
    assert exchange.body_truncated
    assert len(exchange.body) == 1_000_000
    assert "1000000-byte limit once decoded (gzip)" in (exchange.error or "")


def test_a_zip_bomb_stream_stops_at_the_decoded_cap(client_for: Callable[..., Client]) -> None:
    bomb = gzip.compress(b"data: " + b"0" * 20_000_000 + b"\n\n")
    handler = coded(bomb, "gzip", "text/event-stream")
    exchange = client_for(handler, max_stream_bytes=100_000).stream("POST", URL, json_body={})
    assert exchange.state is StreamState.FAILED
    assert exchange.stream_bytes <= 100_000
    assert "100000-byte limit once decoded (gzip)" in (exchange.error or "")


def test_the_decoder_never_inflates_past_the_room_it_is_given() -> None:
    decoder = Decoder("gzip")
    assert len(decoder.feed(gzip.compress(b"x" * 10_000_000), 999)) == 1000


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, br", "compress"])
def test_a_coding_the_client_did_not_ask_for_is_named_not_read(
    client_for: Callable[..., Client], coding: str
) -> None:
    exchange = client_for(coded(b"\x1b\x00garbage", coding)).post(URL, {})
    assert exchange.body == b""
    assert f"content-encoding {coding!r} is not one the client asked for" in (exchange.error or "")
    streamed = client_for(coded(b"\x1b\x00", coding, "text/event-stream")).stream(
        "POST", URL, json_body={}
    )
    assert streamed.state is StreamState.FAILED
    assert coding in streamed.state_reason


def test_a_corrupt_or_truncated_coded_body_says_so(client_for: Callable[..., Client]) -> None:
    corrupt = client_for(coded(b"\x1f\x8b\x08\x00garbage-not-gzip", "gzip")).post(URL, {})
    assert "does not decode" in (corrupt.error or "")
    whole = gzip.compress(json.dumps(BODY).encode())
    cut = client_for(coded(whole[: len(whole) - 6], "gzip")).post(URL, {})
    assert "ended before its end" in (cut.error or "")


def test_identity_and_no_coding_read_as_they_are() -> None:
    assert decoder_for(None).identity
    assert decoder_for("identity").identity
    with pytest.raises(CodingError, match="'br'"):
        decoder_for("br")


@pytest.mark.parametrize("coding", ["gzip", "deflate", "identity"])
def test_the_encoder_round_trips_chunk_by_chunk(coding: str) -> None:
    encoder, decoder = Encoder(coding), Decoder(coding)
    out = bytearray()
    for chunk in (b"data: 1\n\n", b"data: 2\n\n"):
        out += decoder.feed(encoder.feed(chunk), 1 << 20)
        assert out.endswith(chunk)  # each chunk decodes as soon as it is sent
    out += decoder.feed(encoder.finish(), 1 << 20)
    decoder.finish()
    assert bytes(out) == b"data: 1\n\ndata: 2\n\n"


def test_the_reproducer_of_a_coded_reply_asks_curl_to_decode_it(
    client_for: Callable[..., Client],
) -> None:
    coded_reply = client_for(coded(gzip.compress(json.dumps(BODY).encode()), "gzip")).post(URL, {})
    assert "--compressed" in coded_reply.curl().split()
    plain = client_for(coded(json.dumps(BODY).encode(), "identity")).post(URL, {})
    assert "--compressed" not in plain.curl().split()
