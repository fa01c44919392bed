"""The recording proxy in front of a deployment whose ingress compresses: it records every body
and event decoded, and delivers each reply in the coding the deployment answered in, so the
adapter meets what the deployment sent (and, for one that accepts no coding, nothing coded)."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator

import httpx
import pytest

from fake_backends import FakeDeployment
from rl_conformance.certify.audit import AuditLog
from rl_conformance.certify.fleets import VLLM_FLEET
from rl_conformance.certify.injection import Injection
from rl_conformance.certify.proxy import RecordingProxy, readable_codings

BODY = {"model": "toy", "prompt": [512, 733, 1024], "max_tokens": 4}


@pytest.fixture(scope="module")
def proxied() -> Iterator[tuple[RecordingProxy, AuditLog]]:
    log = AuditLog()
    with (
        FakeDeployment(
            VLLM_FLEET.backend, workers=1, ingress_coding="gzip", **VLLM_FLEET.options
        ) as deployment,
        RecordingProxy({"frontend": deployment.frontend_url}, Injection(), log) as proxy,
    ):
        yield proxy, log


def raw_reply(
    proxy: RecordingProxy, accept: str, stream: bool = False
) -> tuple[httpx.Headers, list[bytes]]:
    """The headers the adapter receives and the body's chunks as they arrived, undecoded."""
    with (
        httpx.Client(trust_env=False, timeout=30) as http,
        http.stream(
            "POST",
            proxy.url("frontend") + "/v1/completions",
            json={**BODY, "stream": stream},
            headers={"accept-encoding": accept},
        ) as response,
    ):
        return response.headers, list(response.iter_raw())


def test_a_gzipped_reply_is_recorded_decoded_and_delivered_gzipped(
    proxied: tuple[RecordingProxy, AuditLog],
) -> None:
    proxy, log = proxied
    headers, chunks = raw_reply(proxy, "gzip, deflate")
    assert headers["content-encoding"] == "gzip"
    delivered = json.loads(zlib.decompress(b"".join(chunks), 16 + zlib.MAX_WBITS))
    assert log.records[-1].response == delivered
    assert delivered["choices"][0]["finish_reason"] == "length"


def test_a_gzipped_stream_is_recorded_event_by_event_and_delivered_gzipped(
    proxied: tuple[RecordingProxy, AuditLog],
) -> None:
    proxy, log = proxied
    headers, chunks = raw_reply(proxy, "gzip", stream=True)
    assert headers["content-encoding"] == "gzip"
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    text = b"".join(inflate.decompress(chunk) for chunk in chunks).decode()
    assert inflate.eof
    record = log.records[-1]
    assert record.events == record.upstream_events
    assert record.events[-1] == "[DONE]" and len(record.events) > 2
    assert text.count("data: ") == len(record.events)


def test_an_adapter_that_accepts_no_coding_gets_none(
    proxied: tuple[RecordingProxy, AuditLog],
) -> None:
    proxy, log = proxied
    headers, chunks = raw_reply(proxy, "identity")
    assert "content-encoding" not in headers
    assert json.loads(b"".join(chunks)) == log.records[-1].response


@pytest.mark.parametrize(
    ("adapter", "upstream"),
    [
        (None, "identity"),
        ("gzip, deflate, br, zstd", "gzip, deflate"),
        ("br", "identity"),
        ("deflate;q=0, gzip", "gzip"),
    ],
)
def test_the_proxy_asks_upstream_only_for_codings_both_sides_read(
    adapter: str | None, upstream: str
) -> None:
    assert readable_codings(adapter) == upstream
