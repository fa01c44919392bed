"""A worker taken out of routing leaves it, and comes back when restored.

The spec's administration table: SGLang's `release_memory_occupation` "unregisters and drains
the worker; `resume_memory_occupation` restores it". Dynamo's workers do the same for the
other controls that stop a worker (a paused SGLang worker, a paused or sleeping native-sidecar
worker, a TensorRT-LLM worker whose memory is released): the generate instance leaves discovery
before the engine stops, and rejoins once it serves again. A worker that stays listed while it
serves nothing is a worker the router still sends rollouts to (ai-dynamo/dynamo PR #15078).
Routing membership is what the frontend's `/health` lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import contract
from .base import Findings, Violation, check
from .pause import Answer, answer_findings


@dataclass(frozen=True)
class StopRound:
    """One stop-and-restore of the selected workers with one control, as observed."""

    control: str
    stop_route: str
    restore_route: str
    stopped_workers: int
    stops: Sequence[Answer]
    listed_before: int
    departed: int
    """Instances listed before the stop and absent within the bound after it."""
    bound_s: float
    misrouted: Sequence[int] = ()
    """Instances that left, yet served a generation sent while they were out."""
    restores: Sequence[Answer] = ()
    listed_after: int = 0
    """The most instances listed within the bound after the restore."""
    served_after: bool = True


@check(contract.admin.STOPPED_WORKER_UNROUTED)
def stopped_worker_unrouted(rounds: Sequence[StopRound]) -> Findings:
    for r in rounds:
        yield from answer_findings(r.stops)
        stopped = all(answer.succeeded for answer in r.stops)
        if stopped and r.departed < r.stopped_workers:
            yield Violation(
                f"after {r.stop_route} ({r.control}) on {r.stopped_workers} worker(s), the "
                f"frontend's /health still listed {r.listed_before - r.departed} of the "
                f"{r.listed_before} generate instance(s) it listed before, for {r.bound_s:.0f} s: "
                "a stopped worker stays in routing",
                "/health instances",
                f"at least {r.stopped_workers} fewer",
                f"{r.departed} fewer",
            )
        if r.misrouted:
            yield Violation(
                f"while out of routing after {r.stop_route}, instance(s) {sorted(r.misrouted)} "
                "served a generation",
                "nvext.worker_id.decode_worker_id",
                "an instance still in routing",
                sorted(r.misrouted),
            )
        yield from answer_findings(r.restores)
        restored = all(answer.succeeded for answer in r.restores)
        if restored and r.listed_after < r.listed_before:
            yield Violation(
                f"after {r.restore_route} ({r.control}), the frontend's /health listed "
                f"{r.listed_after} generate instance(s) within {r.bound_s:.0f} s, "
                f"{r.listed_before} before the stop: a restored worker did not rejoin routing",
                "/health instances",
                r.listed_before,
                r.listed_after,
            )
        if not r.served_after:
            yield Violation(
                f"after {r.restore_route} ({r.control}), the deployment did not serve a generation",
                "generation",
                "served",
                "not served",
            )


@dataclass(frozen=True)
class Departure:
    """One worker's process stopped and started again, as discovery and the frontend showed it."""

    bound_s: float
    routed_before: int
    routed_while_gone: int
    """The fewest generate instances `/health` listed within the bound after the stop."""
    usable_before: int | None = None
    """Workers `/v1/rl/workers` listed usable (routes, no `error`); None where the backend
    registers none."""
    usable_while_gone: int | None = None
    whole_again: bool = True
    """Within the bound after the restart, as many usable workers and routed instances as
    before."""


@check(contract.discovery.DEPARTURE_VISIBLE)
def departure_visible(observed: Departure) -> Findings:
    before, gone = observed.usable_before, observed.usable_while_gone
    if before is not None and gone is not None and gone >= before:
        yield Violation(
            f"{observed.bound_s:.0f} s after a worker's process stopped, /v1/rl/workers still "
            f"listed {gone} usable worker(s), as before: the departed worker was neither "
            "dropped nor marked with an `error`",
            "/v1/rl/workers",
            f"fewer than {before} usable",
            gone,
        )
    if observed.routed_while_gone >= observed.routed_before:
        yield Violation(
            f"{observed.bound_s:.0f} s after a worker's process stopped, the frontend's /health "
            f"still listed {observed.routed_while_gone} generate instance(s), as before",
            "/health instances",
            f"fewer than {observed.routed_before}",
            observed.routed_while_gone,
        )
    if not observed.whole_again:
        yield Violation(
            "the worker started again was not listed usable and routed within "
            f"{observed.bound_s:.0f} s",
            "membership",
            "as before the stop",
            "fewer",
        )
