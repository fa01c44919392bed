"""The distributed update and the version-metadata route as a coordinator drives them, per
family, with the calls no worker can honour sent between them (`checks.distributed`).

* `vllm` (the Python worker): `init_weights_update_group` -> `update_weights_from_distributed`
  -> `destroy_weights_update_group`, while paused (the worker takes weights only then). An update
  with no group formed, or after it was destroyed, and one whose `reset_prefix_cache` is no
  boolean, must fail closed.
* `sglang`: the built-in `control/update_weights_from_distributed` (its group routes are methods
  a deployment allowlists, under paths of its choosing, so they are not called); an update
  without `names`, which SGLang's request object requires, must fail closed.
* `update_weight_version` (the native sidecar's `update/update_weight_version`, SGLang's
  `control/update_weight_version`): a body without `new_version` must fail closed.

The group is formed with no trainer on its other end, which only our fakes accept (launched, or
our engine behind the real Dynamo: `weights.synthetic_allowed`). A real engine forms an NCCL group
with the trainer's ranks, and the transport itself is never exercised here: elsewhere the
sequence is not sent, and the test says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..checks.base import MISSING
from ..checks.distributed import Call, Refused, VersionedUpdate, call
from ..client.http import Client
from ..model.target import Target
from ..model.verdict import Verdict
from .admin import AdminClient, AdminWorker
from .families import AdminFamily, new_version
from .refresh import info_version, pinned_generation

NOT_EXERCISED = (
    "the distributed update forms an NCCL group with the trainer's ranks; this suite runs no "
    "trainer, so the group cannot be formed here and the transport is not exercised (our fakes, "
    "and our engine behind the real Dynamo, accept a group with no trainer)"
)
GROUP = "conformance-weights"
TENSORS: dict[str, Any] = {"names": ["conformance.weight"], "dtypes": ["bfloat16"], "shapes": [[2]]}
GROUP_BODY: dict[str, Any] = {
    "master_address": "127.0.0.1",
    "master_port": 29500,
    "rank_offset": 1,
    "world_size": 2,
    "group_name": GROUP,
    "backend": "nccl",
}


@dataclass(frozen=True)
class DistributedRoutes:
    init: str | None
    update: str
    destroy: str | None
    paused: bool
    """The family takes weights only while paused."""
    malformed: Callable[[dict[str, Any]], dict[str, Any]]
    """An update body the family's schema refuses, made from a valid one."""
    why_malformed: str


def _with_non_boolean_reset(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "reset_prefix_cache": "yes"}


def _without_names(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != "names"}


ROUTES: dict[str, DistributedRoutes] = {
    "vllm": DistributedRoutes(
        "init_weights_update_group",
        "update_weights_from_distributed",
        "destroy_weights_update_group",
        paused=True,
        malformed=_with_non_boolean_reset,
        why_malformed="its `reset_prefix_cache` is no boolean",
    ),
    "sglang": DistributedRoutes(
        None,
        "control/update_weights_from_distributed",
        None,
        paused=False,
        malformed=_without_names,
        why_malformed="it lacks `names`, which SGLang's request object requires",
    ),
}
VERSION_ROUTES = ("update/update_weight_version", "control/update_weight_version")
"""The version-metadata routes named `update_weight_version`."""


@dataclass
class WorkerSteps:
    """The calls of one worker's run, each read back as it goes."""

    verdict: Verdict
    admin: AdminClient
    client: Client
    target: Target
    family: AdminFamily
    worker: AdminWorker

    def read(self) -> Any:
        """The version the worker reports: its family's version route, else an info route the
        deployment allowlists, else what a generation pinned to it names; MISSING when none
        can be read (a response that names no version is not a report of `None`)."""
        if self.family.version:
            reply = self.admin.call(self.worker, self.family.version, {}).reply()
            return self.family.read_version(reply)
        found = info_version(self.admin, self.worker, self.family)
        if found is not None:
            return found[1]
        if self.worker.instance_id is None:
            return MISSING
        exchange = pinned_generation(self.client, self.target, self.worker, [640, 1024, 777, 1800])
        self.verdict.status(exchange)
        try:
            engine_data = exchange.json()["nvext"]["engine_data"]
        except (ValueError, KeyError, TypeError):
            return MISSING
        if not isinstance(engine_data, dict) or "weight_version" not in engine_data:
            return MISSING
        return engine_data["weight_version"]

    def send(self, what: str, route: str, body: dict[str, Any]) -> Call:
        exchange = self.admin.call(self.worker, route, body)
        return call(self.family.name, what, route, exchange.status, exchange.reply())

    def refused(self, what: str, route: str, body: dict[str, Any], why: str) -> Refused:
        before = self.read()
        sent = self.send(what, route, body)
        return Refused(sent, why, before, self.read())


def distributed_update(steps: WorkerSteps, routes: DistributedRoutes) -> VersionedUpdate:
    """One worker through its family's distributed sequence, with the calls it must refuse."""
    version = new_version()
    body = {**TENSORS, "group_name": GROUP, "weight_version": version}
    refused = []
    sequence = []
    update = routes.update
    if routes.init is not None:
        refused.append(
            steps.refused("an update before the group", update, body, "no group was formed")
        )
        sequence.append(steps.send("the group's initialisation", routes.init, GROUP_BODY))
    refused.append(
        steps.refused(
            "an update with a malformed body", update, routes.malformed(body), routes.why_malformed
        )
    )
    sequence.append(steps.send("the update", update, body))
    if routes.destroy is not None:
        sequence.append(steps.send("the group's destruction", routes.destroy, {}))
    reported = steps.read()
    if routes.destroy is not None:
        late = {**body, "weight_version": new_version()}
        refused.append(
            steps.refused("an update after the group", update, late, "its group was destroyed")
        )
    return VersionedUpdate(
        steps.family.name, steps.worker.label, sequence, version, reported, refused
    )


def version_update(steps: WorkerSteps, route: str) -> VersionedUpdate:
    """One worker's `update_weight_version`, after one without `new_version`."""
    refused = steps.refused(
        "a version update without a version", route, {}, "it names no `new_version`"
    )
    version = new_version()
    sequence = [steps.send("the version update", route, {"new_version": version})]
    return VersionedUpdate(
        steps.family.name, steps.worker.label, sequence, version, steps.read(), [refused]
    )
