"""Telemetry: framework identity correlates with Dynamo's request trace and never leaks into
metric labels."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from rl_conformance import MissingInput, Unobservable, contract
from rl_conformance.checks import control, trace
from rl_conformance.client.http import Client
from rl_conformance.control import requests
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire import prometheus
from rl_conformance.wire.request_trace import TraceReader
from rl_conformance.wire.stream_state import StreamState

capability = pytest.mark.capability
REQUESTS = 12


@capability(contract.telemetry.BOUNDED_LABELS)
def test_metrics_have_bounded_labels(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    before = rl_client.get(rl_target.url("/metrics"))
    if before.status != 200:
        raise Unobservable(f"the frontend's metrics: GET /metrics answered {before.describe()}")
    if not prometheus.parse(before.body.decode(errors="replace")):
        raise Unobservable(
            "the frontend's metrics: GET /metrics holds no Prometheus series: "
            f"{before.body_preview()}"
        )
    request_ids = []
    for _ in range(REQUESTS):
        request_id = f"conformance-{uuid.uuid4().hex}"
        request_ids.append(request_id)
        rl_client.request(
            "POST",
            rl_target.url("/v1/completions"),
            json_body={"model": rl_target.model, "prompt": [512, 733], "max_tokens": 1},
            headers={"x-request-id": request_id},
        )
    after = rl_client.get(rl_target.url("/metrics"))
    rl_verdict.status(after)
    rl_verdict.check(
        control.bounded_labels(
            before.body.decode(errors="replace"),
            after.body.decode(errors="replace"),
            request_ids,
            REQUESTS,
        ),
        after,
    )


TRACE_WAIT_S = 20.0
"""How long the trace may take to show a finished request: the file sink flushes every second
by default (`DYN_REQUEST_TRACE_FILE_FLUSH_INTERVAL_MS`), so this is twenty flushes."""
TRACE_POLL_S = 0.2
TERMINAL_GRACE_S = 3.0
TRACE_ATTEMPTS = (("unary", False), ("unary", False), ("stream", True))


@capability(contract.telemetry.TRACE_CORRELATION)
def test_attempts_correlate_with_request_trace(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    """Chat completions (the route 1.6.1 writes payload rows for) sent with per-attempt X-RL-*
    headers must each join one payload row and one end row of the frontend's request trace,
    and no X-RL-* value may become a metric label."""
    if not rl_target.request_trace:
        raise MissingInput(
            "the frontend's request trace: give --request-trace FILE (the DYN_REQUEST_TRACE "
            "file sink, with DYN_REQUEST_TRACE_RECORDS=request_end,request_payload and "
            "DYN_REQUEST_TRACE_HTTP_HEADER_CAPTURE_LIST naming the X-RL-* headers)"
        )
    rollout = f"rl-conformance-trace-{uuid.uuid4().hex[:12]}"
    attempts = []
    for number, (route, stream) in enumerate(TRACE_ATTEMPTS):
        attempt = trace.Attempt(
            rollout,
            f"attempt-{number}-{uuid.uuid4().hex[:8]}",
            rl_client.identity.policy_version,
            route=f"chat {route}",
        )
        exchange = requests.chat(
            rl_client, rl_target, stream=stream, max_tokens=4, headers=attempt.headers()
        )
        if exchange.status != 200 or (stream and exchange.state is not StreamState.SUCCESS):
            raise Unobservable(f"a chat completion to correlate: it answered {exchange.describe()}")
        attempts.append(attempt)
    reader = TraceReader(Path(rl_target.request_trace))
    deadline = time.monotonic() + TRACE_WAIT_S
    while True:
        seen = reader.read()
        join = trace.join_attempts(attempts, seen.rows)
        if join.settled or time.monotonic() > deadline:
            break
        if join.counts["joined_payloads"] == len(attempts):
            # Dynamo writes a request's end row with its payload row: once every payload is
            # in, a missing end gets a few flushes more, not the whole wait.
            deadline = min(deadline, time.monotonic() + TERMINAL_GRACE_S)
        time.sleep(TRACE_POLL_S)
    counts = join.counts
    rl_verdict.measure(trace_correlation=join.to_json())
    where = f"the request trace {rl_target.request_trace}"
    if seen.files == 0:
        raise Unobservable(f"{where}: no such file after {TRACE_WAIT_S:g} s (--request-trace)")
    if not seen.rows:
        raise Unobservable(f"{where}: no dynamo.request.trace.v1 row in {TRACE_WAIT_S:g} s")
    if counts["payload_records"] == 0:
        raise Unobservable(
            f"{where}: no request_payload row (DYN_REQUEST_TRACE_RECORDS must include "
            "request_payload)"
        )
    if counts["payloads_with_rl_headers"] == 0:
        raise Unobservable(
            f"{where}: no payload row carries an X-RL-* header "
            "(DYN_REQUEST_TRACE_HTTP_HEADER_CAPTURE_LIST must name them)"
        )
    metrics = rl_client.get(rl_target.url("/metrics"))
    texts = (
        [("the frontend's /metrics", metrics.body.decode(errors="replace"))]
        if metrics.status == 200
        else []
    )
    rl_verdict.check(trace.trace_correlation(join, texts), metrics)
