"""The distributed update and `update_weight_version`, judged per family (`checks.distributed`):
the documented sequence succeeds in its order and declares its version, and a call the worker
cannot honour fails closed. The transport itself (an NCCL group with a trainer) is never
exercised: the sequence is sent only where a group needs no trainer (`control.distributed`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from rl_conformance import Unobservable, contract
from rl_conformance.checks import distributed
from rl_conformance.checks.base import MISSING
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import Selection, paused, select
from rl_conformance.control.distributed import (
    NOT_EXERCISED,
    ROUTES,
    VERSION_ROUTES,
    WorkerSteps,
    distributed_update,
    version_update,
)
from rl_conformance.control.weights import WeightSource, synthetic_allowed
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating


def steps_on(
    verdict: Verdict, admin: AdminClient, client: Client, target: Target, chosen: Selection
) -> list[WorkerSteps]:
    return [
        WorkerSteps(verdict, admin, client, target, chosen.family, worker)
        for worker in chosen.workers
    ]


def judge(verdict: Verdict, updates: list[distributed.VersionedUpdate], what: str) -> None:
    """Every worker's run judged; a worker whose version could not be read back named."""
    for update in updates:
        verdict.check(distributed.versioned_update(update))
    unread = [update.worker for update in updates if update.reported is MISSING]
    if unread:
        raise Unobservable(
            f"the version {what} declared, on {', '.join(unread)}: the family has no version "
            "route and no generation can be pinned to them"
        )


@contextlib.contextmanager
def paused_if(
    verdict: Verdict, admin: AdminClient, chosen: Selection, wanted: bool
) -> Iterator[None]:
    if not wanted:
        yield
        return
    with paused(verdict, admin, chosen):
        yield


@capability(contract.admin.DISTRIBUTED_UPDATE)
def test_the_distributed_update_runs_in_order_and_fails_closed(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """On every selected worker: the Python worker's `init_weights_update_group` ->
    `update_weights_from_distributed` -> `destroy_weights_update_group` (paused), SGLang's
    built-in `control/update_weights_from_distributed`, each call succeeding by status and body
    and the version it declares then reported; an update with no group (before it was formed,
    after it was destroyed) or with a body the family's schema refuses fails closed."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    if not rl_admin.policy.permits(chosen.workers[0].instance_id):  # a read-only run says so
        raise rl_admin.policy.refusal(f"a distributed update on {chosen.label}")
    routes = ROUTES.get(chosen.family.name)
    if routes is None:
        raise Unobservable(
            f"the {chosen.family.name} family takes weights by its transfer lifecycle "
            "(init/start/update/finish), judged by the refresh rows, not by distributed routes"
        )
    if not synthetic_allowed(rl_target):
        raise Unobservable(NOT_EXERCISED)
    updates = []
    try:
        with paused_if(rl_verdict, rl_admin, chosen, routes.paused):
            for steps in steps_on(rl_verdict, rl_admin, rl_client, rl_target, chosen):
                updates.append(distributed_update(steps, routes))
    finally:
        rl_weights.replaced(chosen.workers)
    judge(rl_verdict, updates, "the distributed update")


@capability(contract.admin.DISTRIBUTED_UPDATE)
def test_update_weight_version_declares_its_version_and_fails_closed(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """On every selected worker: `update_weight_version` with a `new_version` succeeds and the
    worker then reports it; one without `new_version` fails closed (refused, the version it
    reported unchanged)."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    if not rl_admin.policy.permits(chosen.workers[0].instance_id):  # a read-only run says so
        raise rl_admin.policy.refusal(f"update_weight_version on {chosen.label}")
    route = chosen.family.set_version
    if route not in VERSION_ROUTES:
        raise Unobservable(
            f"the {chosen.family.name} family names versions with {route}, not "
            "update_weight_version (judged by refresh.version_verified)"
        )
    updates = [
        version_update(steps, route)
        for steps in steps_on(rl_verdict, rl_admin, rl_client, rl_target, chosen)
    ]
    judge(rl_verdict, updates, "update_weight_version")
