"""`--ingress-coding gzip|deflate`: an ingress in front of the frontend compresses JSON and event
streams for a client that accepts the coding, and nothing for one that does not."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from collections.abc import Iterator

import httpx
import pytest

from fake_backends import FakeDeployment
from fake_backends.deployment.ingress import accepts

BODY = {"model": "toy", "prompt": [512, 733, 1024], "max_tokens": 4}


@pytest.fixture(scope="module")
def gzipping() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", workers=1, ingress_coding="gzip") as fleet:
        yield fleet


def post(
    fleet: FakeDeployment, body: dict[str, object], accept: str | None
) -> tuple[httpx.Headers, bytes]:
    """The reply's headers and its bytes as sent, undecoded."""
    headers = {"accept-encoding": accept or "identity"}
    with (
        httpx.Client(trust_env=False, timeout=30) as http,
        http.stream(
            "POST", fleet.frontend_url + "/v1/completions", json=body, headers=headers
        ) as response,
    ):
        return response.headers, b"".join(response.iter_raw())


def test_json_is_gzipped_for_a_client_that_accepts_gzip(gzipping: FakeDeployment) -> None:
    headers, raw = post(gzipping, BODY, "gzip, deflate")
    assert headers["content-encoding"] == "gzip"
    assert "content-length" not in headers
    document = json.loads(gzip.decompress(raw))
    assert document["choices"][0]["finish_reason"] == "length"


def test_streams_are_gzipped_and_every_chunk_decodes_on_arrival(gzipping: FakeDeployment) -> None:
    with (
        httpx.Client(trust_env=False, timeout=30) as http,
        http.stream(
            "POST",
            gzipping.frontend_url + "/v1/completions",
            json={**BODY, "stream": True},
            headers={"accept-encoding": "gzip"},
        ) as response,
    ):
        assert response.headers["content-encoding"] == "gzip"
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        decoded = [inflate.decompress(chunk) for chunk in response.iter_raw()]
    assert all(piece.endswith(b"\n\n") for piece in decoded if piece)
    assert b"".join(decoded).rstrip().endswith(b"data: [DONE]")


def test_a_client_that_accepts_no_coding_gets_identity(gzipping: FakeDeployment) -> None:
    headers, raw = post(gzipping, BODY, None)
    assert "content-encoding" not in headers
    assert json.loads(raw)["object"] == "text_completion"


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("gzip", True),
        ("deflate, gzip;q=0.5", True),
        ("*", True),
        ("gzip;q=0", False),
        ("br", False),
    ],
)
def test_accept_encoding_is_read_as_an_ingress_reads_it(header: str, accepted: bool) -> None:
    assert accepts(header, "gzip") is accepted


def test_an_unknown_ingress_coding_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="unknown ingress coding 'br'"):
        FakeDeployment("vllm", ingress_coding="br")
    done = subprocess.run(
        [sys.executable, "-m", "fake_backends", "vllm", "--ingress-coding", "br"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--ingress-coding" in done.stderr
