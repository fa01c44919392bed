"""Policy refresh, the version: every worker reports the version applied, over consecutive
refits, and the name the version-metadata route gives."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance import FeatureAbsent, Unobservable, contract
from rl_conformance.checks import control
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import Selection, apply_update, select, succeed_each
from rl_conformance.control.each_worker import at_once, label, pins, require_observed
from rl_conformance.control.families import new_version
from rl_conformance.control.refresh import info_version
from rl_conformance.control.refresh_probes import REFITS, generate_ids
from rl_conformance.control.weights import WeightSource
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating


def reported_versions(
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_client: Client,
    rl_target: Target,
    chosen: Selection,
) -> dict[str, Any]:
    """The weight version each selected worker reports: from the family's version route, else
    from an info route the deployment allowlists (named with the worker route), else from what a
    generation pinned to it names (`each_worker.pins`), every worker read at once; none of them
    is an unobservable channel, and neither is a worker no generation can be pinned to."""
    family = chosen.family
    if family.version:
        replies = succeed_each(rl_verdict, rl_admin, chosen.workers, family, family.version, {})
        return {
            worker.label: family.read_version(reply)
            for worker, reply in zip(chosen.workers, replies, strict=True)
        }
    found_each = at_once(lambda worker: info_version(rl_admin, worker, family), chosen.workers)
    read = {worker.label: found for worker, found in zip(chosen.workers, found_each, strict=True)}
    if read and all(found is not None for found in read.values()):
        return {
            f"{label} (/engine/{found[0]})": found[1]
            for label, found in read.items()
            if found is not None
        }
    reported = {}
    workers = pins(chosen, every=True)
    generated = at_once(
        lambda worker: generate_ids(rl_verdict, rl_client, rl_target, worker), workers
    )
    for worker, (_, seen) in zip(workers, generated, strict=True):
        if seen is None:
            raise Unobservable(
                f"the weight version of {chosen.label}: the {family.name} family has no version "
                "route, "
                + (
                    "the worker serves none of "
                    f"{', '.join(f'/engine/{r}' for r in family.info_routes)} (not allowlisted), "
                    if family.info_routes
                    else ""
                )
                + "and responses carry no nvext.engine_data.weight_version"
            )
        reported[label(worker)] = seen
    require_observed(chosen, "the weight version each worker serves", every=True)
    return reported


@capability(contract.refresh.VERSION_VERIFIED)
def test_every_worker_reports_the_applied_version(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """Over `REFITS` consecutive updates, each new version is the one every worker reports:
    a version read-back that follows the first refit only is a stale read on the next."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    for _ in range(REFITS):
        version = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
        reported = reported_versions(rl_verdict, rl_admin, rl_client, rl_target, chosen)
        rl_verdict.measure(
            policy_update={
                "target_version": str(version),
                "workers_targeted": len(chosen.workers),
                "workers_verified": sum(value == version for value in reported.values()),
            }
        )
        rl_verdict.check(control.version_verified(version, reported))


@capability(contract.refresh.VERSION_VERIFIED)
def test_version_metadata_is_reported_back(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """The family's version-metadata route (`set_weight_version`, the sidecar's
    `update/update_weight_version`, SGLang's `control/update_weight_version`) names the weights
    without replacing them; every worker then reports that name."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    if family.set_version is None:
        raise FeatureAbsent(f"the {family.name} family has no version-metadata route to verify")
    version = new_version()
    call = family.set_version_call(version)
    assert call is not None
    succeed_each(rl_verdict, rl_admin, chosen.workers, family, call.route, dict(call.body))
    reported = reported_versions(rl_verdict, rl_admin, rl_client, rl_target, chosen)
    rl_verdict.check(control.version_verified(version, reported))
