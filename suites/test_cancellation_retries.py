"""Cancellation reaches the engine; retries keep attempt identity; late completions are visible.

The deployment-side evidence is what any Dynamo deployment publishes: each worker's system
server counts the requests, cancellations and in-flight work of its generate endpoint on
`/metrics`. Workers come from discovery or from `--worker-url`; without either, or when no
worker publishes those counters, the tests say so and judge nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from rl_conformance import MissingInput, Unobservable
from rl_conformance.admin import AdminWorker
from rl_conformance.checks import control
from rl_conformance.client import Client
from rl_conformance.fleet import GenerateCounters, generate_counters
from rl_conformance.stream_state import StreamState
from rl_conformance.target import Target
from rl_conformance.verdict import Verdict

capability = pytest.mark.capability
PROMPT = [512, 733, 1024, 1999, 300]
# Long enough that a client who leaves after the first event leaves a generation still running,
# on our fakes and on the real Dynamo with a fast toy engine; short of every context window.
LONG_GENERATION = 2000
SETTLE_S = 5.0


def counters(client: Client, workers: list[AdminWorker]) -> GenerateCounters:
    """The workers' generate counters now, or why they cannot be read."""
    if not any(worker.system_url for worker in workers):
        raise MissingInput(
            "worker metrics: no worker system URL is known (discovery lists none: give each "
            "worker's system URL with --worker-url)"
        )
    found = generate_counters(client, workers)
    if found is None:
        raise Unobservable(
            "worker metrics: no worker system server publishes "
            "dynamo_component_{requests_total,cancellation_total,inflight_requests} for its "
            "generate endpoint"
        )
    return found


def settle(
    client: Client,
    workers: list[AdminWorker],
    done: Callable[[GenerateCounters], bool],
    timeout_s: float = SETTLE_S,
) -> tuple[GenerateCounters, float]:
    """Poll the counters until `done` holds or the time is up; returns them and the wait."""
    started = time.monotonic()
    while True:
        now = generate_counters(client, workers)
        waited = time.monotonic() - started
        if now is not None and (done(now) or waited >= timeout_s):
            return now, waited
        if waited >= timeout_s:
            raise Unobservable("worker metrics stopped answering while the test waited")
        time.sleep(0.05)


def long_completion(target: Target, *, stream: bool) -> dict[str, object]:
    return {
        "model": target.model,
        "prompt": PROMPT,
        "max_tokens": LONG_GENERATION,
        "temperature": 0,
        "ignore_eos": True,
        "stream": stream,
    }


@capability("cancel.propagation")
def test_closing_a_stream_aborts_the_generation(
    client: Client, target: Target, verdict: Verdict, admin_workers: list[AdminWorker]
) -> None:
    before = counters(client, admin_workers)
    attempt = f"conformance-{uuid.uuid4().hex}"
    exchange = client.stream(
        "POST",
        target.url("/v1/completions"),
        json_body=long_completion(target, stream=True),
        headers={"x-request-id": attempt},
        cancel_after_events=1,
    )
    verdict.status(exchange)
    if exchange.state is not StreamState.CANCELED:
        raise Unobservable(
            f"the stream ended ({exchange.state_reason}) before the client could leave it, "
            f"even at max_tokens {LONG_GENERATION}"
        )
    after, waited = settle(
        client,
        admin_workers,
        lambda now: (
            now.inflight <= before.inflight and now.cancellations >= before.cancellations + 1
        ),
    )
    verdict.check(
        control.cancellation_propagated(
            after.cancellations - before.cancellations,
            max(0.0, after.inflight - before.inflight),
            waited,
        ),
        exchange,
    )


@capability("retry.attempt_identity")
def test_retry_after_timeout_keeps_attempts_distinguishable(
    client: Client, target: Target, verdict: Verdict, admin_workers: list[AdminWorker]
) -> None:
    """An attempt abandoned at the client's deadline, then retried under the same attempt id:
    the retry is answered as itself, and the abandoned attempt does not also run to completion
    unseen (the worker counters show it cancelled, or the test says they cannot)."""
    try:
        before: GenerateCounters | None = counters(client, admin_workers)
    except (MissingInput, Unobservable):
        before = None
    attempt = f"conformance-{uuid.uuid4().hex}"
    headers = {"x-request-id": attempt}
    slow = client.request(
        "POST",
        target.url("/v1/completions"),
        json_body=long_completion(target, stream=False),
        headers={**headers, "x-fake-delay-ms": "800"},
        deadline_s=0.3,
    )
    body = {"model": target.model, "prompt": PROMPT, "max_tokens": 4, "temperature": 0}
    retry = client.request("POST", target.url("/v1/completions"), json_body=body, headers=headers)
    parsed = verdict.json(retry)
    verdict.check(
        control.attempt_identity(attempt, retry.headers.get("x-request-id"), [parsed.get("id")]),
        retry,
    )
    if before is None or slow.status is not None:
        return
    after, _ = settle(
        client,
        admin_workers,
        lambda now: now.inflight <= before.inflight and now.requests >= before.requests + 2,
    )
    completed = (after.requests - before.requests) - (after.cancellations - before.cancellations)
    verdict.check(control.late_completion_detected(int(completed)), retry)
