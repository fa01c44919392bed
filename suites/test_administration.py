"""Worker administration: negotiated routes, verbatim URLs, success by status AND body."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance import FeatureAbsent, MissingInput
from rl_conformance.admin import AdminClient, AdminWorker
from rl_conformance.admin_steps import administered, apply_update, select
from rl_conformance.checks import admin as admin_checks
from rl_conformance.checks import discovery
from rl_conformance.client import Client
from rl_conformance.refresh import VLLM
from rl_conformance.target import Target
from rl_conformance.verdict import Verdict

capability = pytest.mark.capability


@capability("admin.route_negotiation")
def test_workers_advertise_what_the_update_path_needs(
    client: Client, target: Target, verdict: Verdict
) -> None:
    if not target.rl_url:
        raise MissingInput("no RL listener URL for this target (give --rl-url)")
    exchange = client.get(target.rl("/v1/rl/workers"))
    body = verdict.json(exchange)
    verdict.check(discovery.protocol_version(body), exchange)
    workers = [w for w in discovery.workers_of(body) if "error" not in w]
    if not workers:
        raise FeatureAbsent("GET /v1/rl/workers lists no RL workers")
    for worker in workers:
        verdict.check(admin_checks.route_negotiation(worker, VLLM.update_path), exchange)


@capability("admin.route_negotiation")
def test_advertised_routes_are_called_verbatim(
    client: Client,
    target: Target,
    verdict: Verdict,
    admin: AdminClient,
    admin_workers: list[AdminWorker],
) -> None:
    """liveness_probe (read-only) on every worker through `{system_url}/engine/{route}`."""
    workers = [w for w in administered(target, admin_workers) if w.routes is not None]
    if not workers:
        raise FeatureAbsent("no worker is advertised by discovery")
    for worker in workers:
        exchange = admin.call(worker, "liveness_probe")
        assert exchange.request.url == f"{worker.system_url.rstrip('/')}/engine/liveness_probe"
        verdict.check(
            admin_checks.success_semantics(
                "vllm", exchange.status, _json(exchange), f"liveness_probe on {worker.label}"
            ),
            exchange,
        )


@capability("admin.success_semantics")
def test_unadvertised_route_is_a_404(
    client: Client,
    target: Target,
    verdict: Verdict,
    admin: AdminClient,
    admin_workers: list[AdminWorker],
) -> None:
    worker = select(target, admin_workers).workers[0]
    assert worker.system_url is not None
    if not admin.policy.permits(worker.instance_id):
        raise admin.policy.refusal(f"a request to an unadvertised route of {worker.label}")
    exchange = client.post(f"{worker.system_url.rstrip('/')}/engine/conformance_no_such_route", {})
    verdict.check(admin_checks.unknown_route(exchange.status, _json(exchange)), exchange)


@capability("admin.success_semantics")
@pytest.mark.mutating
def test_update_succeeds_by_status_and_body(
    client: Client,
    target: Target,
    verdict: Verdict,
    admin: AdminClient,
    admin_workers: list[AdminWorker],
    update_model_path: Any,
) -> None:
    """Pause, apply a named version, resume: each reply must say success in its body."""
    apply_update(verdict, admin, select(target, admin_workers), update_model_path)


def _json(exchange: object) -> object:
    try:
        return exchange.json()  # type: ignore[attr-defined]
    except ValueError:
        return None
