"""A vLLM Python worker reports the last weight version declared to it ("Read and Declare the
Weight Version", upstream's integration reference): a `null` declaration is one, an update that
omits `weight_version` is none and leaves the previous declaration in place, an explicit
`"unknown"` is one like any other."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance import FeatureAbsent, NotAdvertised, contract
from rl_conformance.checks.declaration import Declared, version_declaration
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import paused, require_update_routes, select, succeed
from rl_conformance.control.each_worker import at_once
from rl_conformance.control.families import VLLM, new_version
from rl_conformance.control.weights import WeightSource
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
UNKNOWN = "unknown"


@capability(contract.admin.VERSION_DECLARATION)
def test_a_worker_reports_the_last_version_declared_to_it(
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    silent = [
        worker.label
        for worker in chosen.workers
        if worker.routes is not None and VLLM.set_version not in worker.routes
    ]
    if silent:
        raise NotAdvertised(
            f"{VLLM.set_version} is not advertised by {', '.join(silent)}: declaration "
            "tracking is not offered (a missing version_declared is not false)"
        )
    if family is not VLLM:
        raise FeatureAbsent(f"the {family.name} family tracks no version declaration")
    require_update_routes(chosen)
    rl_weights.require(family)
    policy = rl_weights.new(family, chosen.workers)
    (update,) = family.update_calls(policy)
    unversioned = {k: v for k, v in update.body.items() if k != "weight_version"}
    declared = new_version()

    def call(worker: AdminWorker, route: str, body: dict[str, Any]) -> Any:
        return succeed(rl_verdict, rl_admin, worker, family, route, body)

    def stored(worker: AdminWorker, after: str, version: Any) -> Declared:
        reply = call(worker, "get_weight_version", {})
        return Declared(f"get_weight_version after {after}", reply, version, True)

    def declarations(worker: AdminWorker) -> list[Declared]:
        call(worker, "set_weight_version", {"weight_version": declared})
        found = [stored(worker, f"set_weight_version {declared!r}", declared)]
        call(worker, "set_weight_version", {"weight_version": None})
        found.append(stored(worker, "set_weight_version null", None))
        call(worker, "set_weight_version", {"weight_version": declared})
        return found

    def updates(worker: AdminWorker) -> list[Declared]:
        bare = f"{update.route} without weight_version"
        reply = call(worker, update.route, dict(unversioned))
        found = [Declared(bare, reply, UNKNOWN, False)]
        found.append(stored(worker, f"set_weight_version {declared!r}, then {bare}", declared))
        explicit = f'{update.route} with weight_version "unknown"'
        reply = call(worker, update.route, {**unversioned, "weight_version": UNKNOWN})
        found.append(Declared(explicit, reply, UNKNOWN, True))
        found.append(stored(worker, explicit, UNKNOWN))
        return found

    # each worker's calls in order, the workers at once (`each_worker.at_once`)
    replies = [reply for found in at_once(declarations, chosen.workers) for reply in found]
    with paused(rl_verdict, rl_admin, chosen):
        replies += [reply for found in at_once(updates, chosen.workers) for reply in found]
    rl_weights.loaded(chosen.workers, policy)
    rl_verdict.check(version_declaration(replies))
