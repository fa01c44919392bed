"""Prometheus text exposition, read as a deployment publishes it on `/metrics`.

A Dynamo deployment tells more about itself on `/metrics` than in any response body: the frontend
counts disconnected clients and cancelled requests, and every worker's system server counts the
requests, cancellations and in-flight work of its endpoints, labelled with its own instance id
(`worker_id`, in hexadecimal). The suite reads those series to judge what it cannot see on the
wire (did a cancellation reach the engine?) and to learn a worker's identity from its URL.

Pure: no I/O. Malformed lines are skipped, never fatal: a deployment's metrics are evidence, not
a contract of their own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

# Series of a Dynamo runtime endpoint (a worker's system server) and of the frontend, as the
# real 1.6.1 publishes them (fixtures/dynamo-1.6.1/*/worker_metrics*.json, frontend_metrics*).
WORKER_REQUESTS = "dynamo_component_requests_total"
WORKER_CANCELLATIONS = "dynamo_component_cancellation_total"
WORKER_INFLIGHT = "dynamo_component_inflight_requests"
WORKER_RESPONSE_BYTES = "dynamo_component_response_bytes_total"
GENERATE_ENDPOINT = "generate"


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


def parse(text: str) -> list[Sample]:
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        labels = dict(_LABEL.findall(match.group(2) or ""))
        samples.append(Sample(match.group(1), labels, value))
    return samples


def series(samples: Iterable[Sample]) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """Each distinct (name, labels) once: what a scraper would store."""
    return {(sample.name, tuple(sorted(sample.labels.items()))) for sample in samples}


def total(samples: Iterable[Sample], name: str, **labels: str) -> float | None:
    """The sum of every series `name` whose labels include `labels`; None when there is none."""
    found = [
        sample.value
        for sample in samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    ]
    values = [value for value in found if math.isfinite(value)]
    return sum(values) if found else None


def worker_instance_id(samples: Iterable[Sample]) -> int | None:
    """The instance id a worker's system server labels its generate endpoint with (`worker_id`,
    hexadecimal in Dynamo 1.6.1), or None when it names none or several."""
    ids = {
        sample.labels["worker_id"]
        for sample in samples
        if sample.name.startswith("dynamo_component_")
        and sample.labels.get("dynamo_endpoint") == GENERATE_ENDPOINT
        and "worker_id" in sample.labels
    }
    if len(ids) != 1:
        return None
    try:
        return int(ids.pop(), 16)
    except ValueError:
        return None
