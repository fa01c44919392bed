"""Worker administration: negotiated routes, verbatim URLs, success by status AND body."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance import FeatureAbsent, MissingInput, contract
from rl_conformance.checks import admin as admin_checks
from rl_conformance.checks import discovery
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import administered, apply_update, select
from rl_conformance.control.each_worker import at_once
from rl_conformance.control.families import (
    TRANSFER_ALL_OR_NONE,
    AdminFamily,
    discovered_family,
)
from rl_conformance.control.weights import WeightSource
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability


@capability(contract.admin.ROUTE_NEGOTIATION)
def test_workers_advertise_what_the_update_path_needs(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> None:
    if not rl_target.rl_url:
        raise MissingInput("no RL listener URL for this target (give --rl-url)")
    exchange = rl_client.get(rl_target.rl("/v1/rl/workers"))
    body = rl_verdict.json(exchange)
    rl_verdict.check(discovery.protocol_version(body), exchange)
    rl_verdict.check(discovery.dynamo_listener(body), exchange)
    workers = [w for w in discovery.workers_of(body) if "error" not in w]
    if not workers:
        raise FeatureAbsent("GET /v1/rl/workers lists no RL workers")
    exposed: dict[str, list[str]] = {}
    for worker in workers:
        family = discovered_family(worker.get("routes"))
        required = family.required if family is not None else None
        rl_verdict.check(
            admin_checks.route_negotiation(worker, required, TRANSFER_ALL_OR_NONE), exchange
        )
        if family is not None and isinstance(worker.get("routes"), list):
            exposed[str(worker.get("instance_id"))] = beyond_the_update_path(
                family, worker["routes"]
            )
    # Evidence, not a verdict: "expose only the backend methods the integration requires".
    rl_verdict.measure(advertised_beyond_the_update_path=exposed)


def beyond_the_update_path(family: AdminFamily, routes: list[Any]) -> list[str]:
    """The advertised routes a refresh of this family never calls (nor its read-only probe, nor
    its version rename)."""
    used = {*family.update_path, *family.required, family.probe, family.set_version}
    return sorted(str(route) for route in routes if route not in used)


@capability(contract.admin.ROUTE_NEGOTIATION)
def test_advertised_routes_are_called_verbatim(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """The family's read-only probe (`liveness_probe`, `control/is_paused`) on every worker,
    through `{system_url}/engine/{route}`, the route exactly as advertised."""
    workers = [w for w in administered(rl_target, rl_admin_workers) if w.routes is not None]
    if not workers:
        raise FeatureAbsent("no worker is advertised by discovery")
    probes = []
    for worker in workers:
        family = discovered_family(worker.routes)
        if family is None or family.probe is None:
            raise FeatureAbsent(f"{worker.label} speaks no known administration family")
        probes.append((worker, family, family.probe))
    # every worker's probe at once (read-only, bounded as every fan-out is), judged in order
    exchanges = at_once(lambda probe: rl_admin.call(probe[0], probe[2]), probes)
    for (worker, family, _), exchange in zip(probes, exchanges, strict=True):
        assert family.probe is not None and worker.system_url is not None
        assert exchange.request.url == f"{worker.system_url.rstrip('/')}/engine/{family.probe}"
        rl_verdict.check(
            admin_checks.success_semantics(
                family.name, family.probe, exchange.status, _json(exchange), worker.label
            ),
            exchange,
        )


@capability(contract.admin.SUCCESS_SEMANTICS)
def test_unadvertised_route_is_a_404(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    worker = select(rl_target, rl_admin_workers, rl_admin.policy).workers[0]
    assert worker.system_url is not None
    if not rl_admin.policy.permits(worker.instance_id):
        raise rl_admin.policy.refusal(f"a request to an unadvertised route of {worker.label}")
    exchange = rl_client.post(
        f"{worker.system_url.rstrip('/')}/engine/conformance_no_such_route", {}
    )
    rl_verdict.check(admin_checks.unknown_route(exchange.status, _json(exchange)), exchange)


@capability(contract.admin.SUCCESS_SEMANTICS)
@pytest.mark.mutating
def test_update_succeeds_by_status_and_body(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """Pause, apply a named version, resume: each reply must say success in its body."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    apply_update(rl_verdict, rl_admin, chosen, rl_weights)


def _json(exchange: object) -> object:
    try:
        return exchange.json()  # type: ignore[attr-defined]
    except ValueError:
        return None
