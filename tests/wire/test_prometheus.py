"""Reading a deployment's /metrics: the series the real 1.6.1 publishes, and worker identity."""

from __future__ import annotations

import json
from pathlib import Path

from rl_conformance.wire import prometheus

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "dynamo-1.6.1"


def recorded_text(engine: str, name: str) -> str:
    return str(json.loads((RECORDED / engine / f"{name}.json").read_text())["response"]["text"])


def test_a_real_worker_names_its_instance_id_in_hex_on_its_generate_series() -> None:
    for engine in ("toy-worker", "mocker"):
        samples = prometheus.parse(recorded_text(engine, "worker_metrics_after_cancel"))
        labels = next(s.labels for s in samples if s.name == prometheus.WORKER_REQUESTS)
        assert prometheus.worker_instance_id(samples) == int(labels["worker_id"], 16)


def test_the_generate_counters_of_a_real_worker_after_one_cancelled_stream() -> None:
    samples = prometheus.parse(recorded_text("mocker", "worker_metrics_after_cancel"))

    def total(name: str) -> float | None:
        return prometheus.total(samples, name, dynamo_endpoint=prometheus.GENERATE_ENDPOINT)

    assert total(prometheus.WORKER_REQUESTS) == 1
    assert total(prometheus.WORKER_INFLIGHT) == 0
    assert (total(prometheus.WORKER_RESPONSE_BYTES) or 0) > 0
    assert total("dynamo_component_no_such_series") is None


def test_malformed_lines_are_skipped_not_fatal() -> None:
    text = 'good{a="1"} 2\nbad{a="1" 3\nnot_a_number{a="1"} x\n# comment\nplain 4\n'
    samples = prometheus.parse(text)
    assert [(s.name, s.value) for s in samples] == [("good", 2.0), ("plain", 4.0)]


def test_no_identity_when_a_server_names_several_workers_or_none() -> None:
    two = prometheus.parse(
        'dynamo_component_requests_total{dynamo_endpoint="generate",worker_id="a1"} 1\n'
        'dynamo_component_requests_total{dynamo_endpoint="generate",worker_id="b2"} 1\n'
    )
    assert prometheus.worker_instance_id(two) is None
    assert prometheus.worker_instance_id(prometheus.parse("other_total 1\n")) is None
