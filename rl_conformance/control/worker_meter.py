"""What a worker generated, as its own counters say, read from its system server's `/metrics`.

A stream's arrival times describe the link between the suite and the frontend as much as the
engine: behind an ingress, a proxy or a congested network, tokens the engine made before a pause
may reach the client after the pause's answer, at the link's pace. A worker's counters are read
from the worker itself and move when it generates, so they say what it did at each moment a
control step needs, whatever the link. Two series, in this order of preference:

- the engine's generated tokens (`vllm:generation_tokens_total`: vLLM's output handler counts
  each engine step's tokens as it processes them; the real Dynamo 1.6.1 vLLM worker publishes it
  on its system server, `fixtures/dynamo-1.6.1/vllm-cpu/worker_metrics.json`);
- the response bytes of the worker's generate endpoint (`dynamo_component_response_bytes_total`,
  Dynamo's runtime, every worker: each generated token adds the bytes of its response).

SGLang counts its generated tokens only when a request finishes (`sglang:generation_tokens_total`,
and only with `--enable-metrics`): no use while a request is held, so its workers are read by
their response bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..checks.pause_modes import TOKENS
from ..client.http import Client
from ..wire import prometheus
from .admin import AdminWorker
from .fleet import scrape

ENGINE_TOKENS = "vllm:generation_tokens_total"
RESPONSE_BYTES = "response bytes"


def _amount(samples: list[prometheus.Sample], unit: str) -> float | None:
    if unit == TOKENS:
        return prometheus.total(samples, ENGINE_TOKENS)
    return prometheus.total(
        samples, prometheus.WORKER_RESPONSE_BYTES, dynamo_endpoint=prometheus.GENERATE_ENDPOINT
    )


class WorkerMeter:
    """What `workers` generated so far, summed, in the one unit every one of them publishes
    (chosen at the first read and kept): one worker a generation is pinned to, or every selected
    worker when no identity is known and a generation may land on any of them. `unit` is None
    until a read found a series, and stays None when none is published."""

    def __init__(self, client: Client, workers: Sequence[AdminWorker]) -> None:
        self.client = client
        self.workers = [worker for worker in workers if worker.system_url]
        self.unit: str | None = None
        self._chosen = False

    @property
    def label(self) -> str:
        return ", ".join(worker.label for worker in self.workers) or "no worker"

    def read(self) -> float | None:
        """The total now; None when a worker did not answer or publishes no series."""
        scraped = []
        for worker in self.workers:
            assert worker.system_url is not None
            samples = scrape(self.client, worker.system_url)
            if samples is None:
                return None
            scraped.append(samples)
        if not scraped:
            return None
        if not self._chosen:
            self._chosen = True
            for unit in (TOKENS, RESPONSE_BYTES):
                if all(_amount(samples, unit) is not None for samples in scraped):
                    self.unit = unit
                    break
        if self.unit is None:
            return None
        amounts = [_amount(samples, self.unit) for samples in scraped]
        if any(amount is None for amount in amounts):
            return None
        return sum(amount for amount in amounts if amount is not None)

    def grew_since(self, before: float | None) -> Callable[[], bool] | None:
        """A test of whether the workers generated since they counted `before` (None when their
        counters could not be read then)."""
        if before is None:
            return None

        def grew() -> bool:
            now = self.read()
            return now is not None and now > before

        return grew

    def growing(self) -> Callable[[], bool] | None:
        """`grew_since` what the workers count now."""
        return self.grew_since(self.read())
