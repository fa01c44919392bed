"""Cancellation reaches the engine; retries keep attempt identity; late completions are visible.

The deployment-side evidence is what any Dynamo deployment publishes: each worker's system
server counts the requests, in-flight work and response bytes of its generate endpoint on
`/metrics`. Response bytes grow with every token a worker generates: read right after the client
leaves and again once the worker is idle, and divided by what one token costs (from a short
reference generation), they tell how much of what the request had left the worker generated
anyway. Workers come from discovery or from `--worker-url`; without either, or when no worker
publishes those series, the tests say so and judge nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from rl_conformance import MissingInput, Unobservable, contract
from rl_conformance.checks import control
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminWorker
from rl_conformance.control.fleet import GenerateCounters, generate_counters
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange
from rl_conformance.wire.stream_state import StreamState

capability = pytest.mark.capability
PROMPT = [512, 733, 1024, 1999, 300]
# Long enough that a client who leaves after the first event leaves most of the generation
# undone, on our fakes and on the real Dynamo (toy engine, mocker at speedup 100); short of
# every context window.
LONG_GENERATION = 2000
REFERENCE_TOKENS = 16
SETTLE_S = 5.0
# Fewer tokens than this left when the client left: too little to tell stopping from finishing.
JUDGEABLE_REMAINDER = 100


class Observer:
    """The workers whose metrics can be read, and the worker generations are pinned to (the
    first whose identity is known), so that what they count is this test's request."""

    def __init__(self, rl_client: Client, workers: list[AdminWorker]) -> None:
        self.client = rl_client
        self.workers = [worker for worker in workers if worker.system_url]
        if not self.workers:
            raise MissingInput(
                "worker metrics: no worker system URL is known (discovery lists none: give "
                "each worker's system URL with --worker-url)"
            )
        self.pinned = next((w for w in self.workers if w.instance_id is not None), None)
        if self.pinned is not None:
            self.workers = [self.pinned]

    def now(self) -> GenerateCounters:
        found = generate_counters(self.client, self.workers)
        if found is None:
            raise Unobservable(
                "worker metrics: no worker system server publishes dynamo_component_"
                "{requests_total,inflight_requests,response_bytes_total} for its generate "
                "endpoint"
            )
        return found

    def settle(
        self, since: GenerateCounters, done: Callable[[GenerateCounters], bool]
    ) -> tuple[GenerateCounters, float]:
        """Poll until `done(counters since then)` holds or SETTLE_S passed; returns the
        change and the wait."""
        started = time.monotonic()
        while True:
            change = self.now().since(since)
            waited = time.monotonic() - started
            if done(change) or waited >= SETTLE_S:
                return change, waited
            time.sleep(0.05)

    def served(self, change: GenerateCounters, requests: int) -> None:
        if change.requests < requests:
            raise Unobservable(
                f"worker metrics: {requests} request(s) sent, {change.requests:g} counted by the "
                "workers whose metrics are known (served by a worker not given with "
                "--worker-url?)"
            )

    def headers(self) -> dict[str, str]:
        if self.pinned is None:
            return {}
        return {"x-dynamo-worker-instance-id": str(self.pinned.instance_id)}

    def continued(
        self,
        before: GenerateCounters,
        left: GenerateCounters,
        per_token: float,
        *,
        extra_tokens: int = 0,
    ) -> tuple[float, GenerateCounters, float]:
        """After a client left a `LONG_GENERATION` request (counters `left`, read right then):
        the share of its remaining tokens the workers generated anyway, the change since
        `before` once they are idle, and the wait. `extra_tokens`: tokens of other requests
        sent after the client left."""
        change, waited = self.settle(before, lambda change: change.inflight <= 0)
        done_when_left = left.since(before).response_bytes / per_token
        remaining = LONG_GENERATION - done_when_left
        if remaining < JUDGEABLE_REMAINDER:
            raise Unobservable(
                f"the worker had generated {done_when_left:.0f} of {LONG_GENERATION} tokens "
                "before the client's departure reached its metrics: too little left to tell "
                "stopping from finishing"
            )
        after_left = (change.response_bytes - left.since(before).response_bytes) / per_token
        return max(0.0, after_left - extra_tokens) / remaining, change, waited

    def bytes_per_token(self, rl_target: Target) -> float:
        """What one generated token costs in response bytes, from a short generation."""
        before = self.now()
        exchange = self.client.post(
            rl_target.url("/v1/completions"),
            completion(rl_target, REFERENCE_TOKENS),
            headers=self.headers(),
        )
        if exchange.status != 200:
            raise Unobservable(f"the reference generation failed: {exchange.describe()}")
        change, _ = self.settle(before, lambda change: change.inflight <= 0)
        self.served(change, 1)
        if change.response_bytes <= 0:
            raise Unobservable("worker metrics: response bytes do not grow with generation")
        return change.response_bytes / REFERENCE_TOKENS


def completion(rl_target: Target, max_tokens: int, *, stream: bool = False) -> dict[str, Any]:
    return {
        "model": rl_target.model,
        "prompt": PROMPT,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": stream,
    }


@capability(contract.cancel.PROPAGATION)
def test_closing_a_stream_aborts_the_generation(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, rl_admin_workers: list[AdminWorker]
) -> None:
    observer = Observer(rl_client, rl_admin_workers)
    per_token = observer.bytes_per_token(rl_target)
    before = observer.now()
    exchange = rl_client.stream(
        "POST",
        rl_target.url("/v1/completions"),
        json_body=completion(rl_target, LONG_GENERATION, stream=True),
        headers=observer.headers(),
        cancel_after_events=1,
    )
    rl_verdict.status(exchange)
    if exchange.state is not StreamState.CANCELED:
        raise Unobservable(
            f"the stream ended ({exchange.state_reason}) before the client could leave it, "
            f"even at max_tokens {LONG_GENERATION}"
        )
    left = observer.now()
    continued, change, waited = observer.continued(before, left, per_token)
    observer.served(change, 1)
    rl_verdict.check(
        control.cancellation_propagated(continued, max(0.0, change.inflight), waited), exchange
    )


@capability(contract.retry.ATTEMPT_IDENTITY)
def test_retry_after_timeout_keeps_attempts_distinguishable(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, rl_admin_workers: list[AdminWorker]
) -> None:
    """An attempt abandoned at the client's deadline, then retried under the same attempt id:
    the retry is answered as itself, and the abandoned attempt does not also run to completion
    unseen (judged from the workers' metrics where they are known)."""
    observer: Observer | None = None
    try:
        observer = Observer(rl_client, rl_admin_workers)
        per_token = observer.bytes_per_token(rl_target)
        before = observer.now()
    except (MissingInput, Unobservable):
        observer = None
    attempt = f"conformance-{uuid.uuid4().hex}"
    headers = {"x-request-id": attempt, **(observer.headers() if observer else {})}
    slow = rl_client.request(
        "POST",
        rl_target.url("/v1/completions"),
        json_body=completion(rl_target, LONG_GENERATION),
        headers={**headers, "x-fake-delay-ms": "800"},
        deadline_s=0.3,
    )
    left = observer.now() if observer is not None else None
    retry = rl_client.request(
        "POST",
        rl_target.url("/v1/completions"),
        json_body=completion(rl_target, 4),
        headers=headers,
    )
    parsed = rl_verdict.json(retry)
    rl_verdict.check(
        control.attempt_identity(attempt, retry.headers.get("x-request-id"), [parsed.get("id")]),
        retry,
    )
    if observer is None or left is None or _answered(slow):
        return
    try:
        continued, change, _ = observer.continued(before, left, per_token, extra_tokens=4)
        observer.served(change, 2)
    except Unobservable:
        return  # the identity was judged; whether the abandoned attempt ran on cannot be
    completed = 1 + int(continued >= control.RAN_ON_FRACTION)
    rl_verdict.check(control.late_completion_detected(completed), retry)


def _answered(exchange: Exchange) -> bool:
    """The request finished within its deadline: there was no late completion to observe."""
    return exchange.status is not None
