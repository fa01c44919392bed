"""Telemetry: framework identity must not leak into metric labels."""

from __future__ import annotations

import uuid

import pytest

from rl_conformance import Unobservable
from rl_conformance.checks import control
from rl_conformance.client.http import Client
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire import prometheus

capability = pytest.mark.capability
REQUESTS = 12


@capability("telemetry.bounded_labels")
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
