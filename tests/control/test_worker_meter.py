"""What a worker generated, read from its own `/metrics`: the engine's generated tokens where
vLLM publishes them, else its generate endpoint's response bytes; one unit for every read, summed
over the workers metered, and nothing when a worker does not answer or publishes neither."""

from __future__ import annotations

import httpx

from rl_conformance.checks.pause_modes import TOKENS
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminWorker
from rl_conformance.control.worker_meter import RESPONSE_BYTES, WorkerMeter

BYTES = 'dynamo_component_response_bytes_total{dynamo_endpoint="generate",worker_id="a"} %d\n'
OTHER = 'dynamo_component_response_bytes_total{dynamo_endpoint="clear_kv_blocks"} 999\n'
ENGINE = 'vllm:generation_tokens_total{engine="0",model_name="m"} %d\n'


def meter(pages: dict[str, list[str | None]]) -> WorkerMeter:
    """A meter over one worker per host of `pages`, each answering its pages in turn (None: 503,
    the last page again once they are used up)."""

    def answer(request: httpx.Request) -> httpx.Response:
        left = pages[request.url.host]
        page = left.pop(0) if len(left) > 1 else left[0]
        if page is None:
            return httpx.Response(503, stream=httpx.ByteStream(b""))
        return httpx.Response(200, stream=httpx.ByteStream(page.encode()))

    client = Client(transport=httpx.MockTransport(answer))
    workers = [AdminWorker(n, f"http://{host}:9", ()) for n, host in enumerate(pages)]
    return WorkerMeter(client, [*workers, AdminWorker(None, None, ())])


def test_the_engine_tokens_are_read_where_published_and_kept_as_the_unit() -> None:
    found = meter({"w": [ENGINE % 40 + BYTES % 5440, ENGINE % 48 + BYTES % 6528]})
    assert [found.read(), found.read()] == [40, 48]
    assert found.unit == TOKENS


def test_response_bytes_of_the_generate_endpoint_otherwise_summed_over_workers() -> None:
    found = meter({"a": [BYTES % 136 + OTHER], "b": [BYTES % 272]})
    assert found.read() == 408
    assert found.unit == RESPONSE_BYTES
    assert "worker 0, worker 1" in found.label


def test_a_worker_that_does_not_answer_or_publishes_nothing_gives_no_reading() -> None:
    assert meter({"a": [None]}).read() is None
    silent = meter({"a": ["# nothing here\n"]})
    assert silent.read() is None and silent.unit is None
    assert meter({"a": [BYTES % 1, None]}).grew_since(0) is not None
    assert meter({"a": [BYTES % 1]}).grew_since(None) is None


def test_growth_is_told_from_what_was_counted_before() -> None:
    found = meter({"a": [BYTES % 136, BYTES % 136, BYTES % 272]})
    grew = found.growing()
    assert grew is not None
    assert not grew()
    assert grew()
