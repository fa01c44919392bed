"""Discovery: the RL listener's `GET /v1/rl/workers`, protocol version 1."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance import FeatureAbsent, contract
from rl_conformance.checks import discovery, schema_check
from rl_conformance.checks.http import status_in
from rl_conformance.client.http import Client, discovery_deadline_s
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability


def read_workers(rl_client: Client, rl_target: Target, rl_verdict: Verdict) -> tuple[Any, Exchange]:
    """One discovery read; the protocol version is checked before anything reads the workers."""
    if not rl_target.rl_url:
        pytest.skip("no RL listener URL for this target (give --rl-url)")
    exchange = rl_client.get(
        rl_target.rl("/v1/rl/workers"), deadline_s=discovery_deadline_s(rl_client.deadline_s)
    )
    body = rl_verdict.json(exchange)
    rl_verdict.check(discovery.protocol_version(body), exchange)
    rl_verdict.check(discovery.dynamo_listener(body), exchange)
    return body, exchange


def require_workers(body: Any) -> list[dict[str, Any]]:
    workers = discovery.workers_of(body)
    if not workers:
        raise FeatureAbsent("GET /v1/rl/workers lists no RL workers")
    return workers


@capability(contract.discovery.PROTOCOL_VERSION)
def test_protocol_version_is_checked_before_workers(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    read_workers(rl_client, rl_target, rl_verdict)


@capability(contract.discovery.SCHEMA)
def test_discovery_body_matches_schema(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    body, exchange = read_workers(rl_client, rl_target, rl_verdict)
    rl_verdict.check(discovery.optional_fields(body), exchange)
    rl_verdict.check(schema_check("discovery-v1", body), exchange)


@capability(contract.discovery.LISTENER_ISOLATION)
def test_discovery_lives_on_its_own_read_only_listener(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    if not rl_target.rl_url:
        pytest.skip("no RL listener URL for this target (give --rl-url)")
    probes = [
        (rl_client.get(rl_target.url("/v1/rl/workers")), {404, 405}),
        (rl_client.post(rl_target.rl("/v1/rl/workers"), {}), {405}),
        (rl_client.get(rl_target.rl("/v1/rl/engines")), {404, 405}),
    ]
    for exchange, allowed in probes:
        rl_verdict.check(status_in(exchange.status, allowed, exchange.describe()), exchange)


@capability(contract.discovery.WORKER_REGISTRATION)
def test_rl_workers_register(rl_client: Client, rl_target: Target, rl_verdict: Verdict) -> None:
    body, _ = read_workers(rl_client, rl_target, rl_verdict)
    require_workers(body)


@capability(contract.discovery.ROUTES)
def test_routes_are_sorted_unique_strings(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    body, exchange = read_workers(rl_client, rl_target, rl_verdict)
    require_workers(body)
    rl_verdict.check(discovery.routes_well_formed(body), exchange)


@capability(contract.discovery.ENDPOINT_IDENTITY)
def test_endpoint_identity_is_exact(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    body, exchange = read_workers(rl_client, rl_target, rl_verdict)
    require_workers(body)
    rl_verdict.check(discovery.request_plane_url(body), exchange)
    rl_verdict.check(discovery.instance_ids(body), exchange)


@capability(contract.discovery.IDENTITY_NOT_POSITION)
def test_workers_are_matched_by_identity_across_reads(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    first, _ = read_workers(rl_client, rl_target, rl_verdict)
    require_workers(first)
    second, exchange = read_workers(rl_client, rl_target, rl_verdict)
    rl_verdict.check(discovery.identity_stable(first, second), exchange)


@capability(contract.discovery.ERROR_FAILS_CLOSED)
def test_probe_errors_fail_closed(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    body, exchange = read_workers(rl_client, rl_target, rl_verdict)
    require_workers(body)
    rl_verdict.check(discovery.error_fails_closed(body), exchange)
