"""The workers of a deployment, as a user reaching it by URL can know them.

Two sources, nothing else: the RL listener (`GET /v1/rl/workers`: identity, routes, `system_url`)
and the system URLs the user gives with `--worker-url` for workers discovery does not list
(SGLang and TensorRT-LLM workers do not register). A worker given by URL tells its own identity on
its system server's `/metrics` (the `worker_id` label of its generate endpoint), which is what lets
a generation be pinned to it; when it does not, the worker's identity stays unknown and the
suites act on every given worker at once instead of pinning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..checks.discovery import foreign_listener
from ..client.http import Client
from ..model.target import Target
from ..model.verdict import FeatureAbsent
from ..wire import prometheus
from .admin import AdminWorker

METRICS_DEADLINE_S = 5.0


def discovered_workers(client: Client, target: Target) -> list[AdminWorker]:
    """Workers the RL listener lists without a probe error (none without --rl-url)."""
    if not target.rl_url:
        return []
    listing = client.get(target.rl("/v1/rl/workers"))
    try:
        body = listing.json() if listing.status == 200 else {}
        workers = body.get("workers", [])
    except (ValueError, AttributeError):
        return []
    foreign = foreign_listener(body)
    if foreign is not None:
        raise FeatureAbsent(foreign)
    if not isinstance(workers, list):
        return []
    return [
        AdminWorker.from_discovery(worker)
        for worker in workers
        if isinstance(worker, dict) and "error" not in worker
    ]


def resolve_workers(client: Client, target: Target) -> list[AdminWorker]:
    """Discovery's workers, then every given worker URL discovery did not already name, with
    its identity read from its own metrics where it publishes one."""
    found = discovered_workers(client, target)
    known = {_normal(worker.system_url) for worker in found if worker.system_url}
    for url in target.worker_urls:
        if _normal(url) in known:
            continue
        known.add(_normal(url))
        scraped = scrape(client, url)
        instance_id = prometheus.worker_instance_id(scraped) if scraped is not None else None
        found.append(AdminWorker(instance_id=instance_id, system_url=url, routes=None))
    return found


def scrape(client: Client, system_url: str) -> list[prometheus.Sample] | None:
    """A system server's metrics; None when it publishes none (no answer, not 200)."""
    exchange = client.get(f"{system_url.rstrip('/')}/metrics", deadline_s=METRICS_DEADLINE_S)
    if exchange.status != 200:
        return None
    return prometheus.parse(exchange.body.decode("utf-8", errors="replace"))


@dataclass(frozen=True)
class GenerateCounters:
    """The generate endpoint's counters, summed over the workers that publish them.

    `response_bytes` is what the workers sent back over the request plane: it grows with every
    token generated, so it tells whether a generation stopped when its client left, which the
    cancellation counter alone does not (the real 1.6.1 mocker stops a cancelled generation at
    once but counts the cancellation only some of the time).
    """

    requests: float
    inflight: float
    response_bytes: float
    cancellations: float
    workers: int

    def since(self, earlier: GenerateCounters) -> GenerateCounters:
        return GenerateCounters(
            self.requests - earlier.requests,
            self.inflight - earlier.inflight,
            self.response_bytes - earlier.response_bytes,
            self.cancellations - earlier.cancellations,
            self.workers,
        )


def generate_counters(client: Client, workers: Sequence[AdminWorker]) -> GenerateCounters | None:
    """None when no worker's system server publishes the generate endpoint's requests,
    in-flight and response-bytes series."""
    totals = [0.0, 0.0, 0.0, 0.0]
    publishing = 0
    for worker in workers:
        if not worker.system_url:
            continue
        samples = scrape(client, worker.system_url)
        if samples is None:
            continue
        values = [
            prometheus.total(samples, name, dynamo_endpoint=prometheus.GENERATE_ENDPOINT)
            for name in (
                prometheus.WORKER_REQUESTS,
                prometheus.WORKER_INFLIGHT,
                prometheus.WORKER_RESPONSE_BYTES,
                prometheus.WORKER_CANCELLATIONS,
            )
        ]
        if any(value is None for value in values[:3]):
            continue
        publishing += 1
        totals = [total + (value or 0.0) for total, value in zip(totals, values, strict=True)]
    if not publishing:
        return None
    return GenerateCounters(*totals, workers=publishing)


def _normal(url: str | None) -> str:
    return (url or "").rstrip("/")
