"""Routing membership: a worker taken out of routing (paused, its memory released, put to sleep)
leaves the instances the frontend routes to, serves nothing meanwhile, and rejoins when restored;
a worker whose process stops is dropped from routing and dropped or marked by discovery
(`checks.membership`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from rl_conformance import FeatureAbsent, Unobservable, contract
from rl_conformance.checks import discovery, membership, pause
from rl_conformance.checks.base import describe
from rl_conformance.client.http import Client
from rl_conformance.contract.kinds import RL_WORKERS, Backend, Support
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import administered, by_identity, select
from rl_conformance.control.families import AdminFamily
from rl_conformance.control.refresh import pinned_generation
from rl_conformance.control.stopping import (
    StopControl,
    routed_instances,
    served_by,
    stop_controls,
)
from rl_conformance.model.target import WORKER_DEPARTURE, Target, WorkerDepartureProbe
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
PROMPT = [640, 1024, 777, 1800, 512, 333, 901, 445]
ANSWER_S = 60.0
"""A stop that drains waits for the requests in flight (TensorRT-LLM's default is 30 s)."""
MEMBERSHIP_S = 30.0
"""Discovery reaches the frontend within this (measured: under 0.2 s with file discovery)."""
POLL_S = 0.1
HEALTH_S = 5.0
PROBES = 2
"""Generations sent while the worker is out, where other instances remain to serve them."""
PROBE_S = 30.0


def answered(control: StopControl, route: str, what: str, exchange: Exchange) -> pause.Answer:
    body = exchange.reply()
    return pause.Answer(
        what=what,
        status=exchange.status,
        body=body,
        error=exchange.error,
        must_succeed=True,
        succeeded=pause.succeeded(control.success_family, route, exchange.status, body),
    )


def listed(client: Client, target: Target) -> set[int]:
    found = routed_instances(client, target, deadline_s=HEALTH_S)
    if found is None:
        raise Unobservable(
            "the frontend's /health lists no `instances`: routing membership is not observable"
        )
    return found


def poll(
    client: Client, target: Target, done: Callable[[set[int]], bool]
) -> tuple[set[int], float]:
    """`/health`'s generate instances until `done(instances)` holds or `MEMBERSHIP_S` passes;
    the last read and when it was taken (seconds from the start)."""
    started = time.monotonic()
    while True:
        now = listed(client, target)
        elapsed = time.monotonic() - started
        if done(now) or elapsed >= MEMBERSHIP_S:
            return now, elapsed
        time.sleep(POLL_S)


def the_worker(
    target: Target, admin: AdminClient, workers: list[AdminWorker]
) -> tuple[AdminWorker, AdminFamily | None]:
    """One worker to take out of routing (the others keep serving), and its family; TensorRT-LLM
    workers, given by URL, speak no discovered family."""
    if target.backend == "trtllm":
        return by_identity(administered(target, workers), admin.policy)[0], None
    chosen = select(target, workers, admin.policy)
    return chosen.workers[0], chosen.family


def stop_round(
    client: Client,
    target: Target,
    admin: AdminClient,
    worker: AdminWorker,
    control: StopControl,
) -> tuple[membership.StopRound, dict[str, float]]:
    before = listed(client, target)
    exchange = admin.call(worker, control.stop, dict(control.body), deadline_s=ANSWER_S)
    stop = answered(control, control.stop, f"{control.stop} ({control.name})", exchange)
    misrouted: list[int] = []
    try:
        if control.absent_unless and stop.status in (404, 405):
            raise FeatureAbsent(
                f"{worker.label} does not serve {control.stop} (HTTP {stop.status}: "
                f"{describe(stop.body)}): it is served only by workers started with "
                f"{control.absent_unless}"
            )
        now, leave_s = before, 0.0
        if stop.succeeded:
            now, leave_s = poll(client, target, lambda now: bool(before - now))
        gone = before - now
        if stop.succeeded and gone and now:
            for _ in range(PROBES):
                served = served_by(
                    pinned_generation(
                        client,
                        target,
                        None,
                        PROMPT,
                        deadline_s=PROBE_S,
                        max_tokens=2,
                        extra_fields=("worker_id",),
                    )
                )
                if served in gone:
                    misrouted.append(served)
    finally:
        restored = admin.call(worker, control.restore, {}, deadline_s=ANSWER_S)
    after, rejoin_s = poll(client, target, lambda now: len(now) >= len(before))
    served_after = pinned_generation(client, target, None, PROMPT, max_tokens=2).status == 200
    observed = membership.StopRound(
        control=control.name,
        stop_route=control.stop,
        restore_route=control.restore,
        stopped_workers=1,
        stops=[stop],
        listed_before=len(before),
        departed=len(gone),
        bound_s=MEMBERSHIP_S,
        misrouted=misrouted,
        restores=[
            answered(control, control.restore, f"{control.restore} ({control.name})", restored)
        ],
        listed_after=len(after),
        served_after=served_after,
    )
    return observed, {"left_s": round(leave_s, 3), "rejoined_s": round(rejoin_s, 3)}


@capability(contract.admin.STOPPED_WORKER_UNROUTED)
@pytest.mark.may_end_worker("a memory release: SGLang 0.5.21 exits if a request is running")
def test_a_stopped_worker_leaves_routing_until_restored(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """Each control the worker offers that takes it out of routing, in turn: stop one worker;
    within `MEMBERSHIP_S` the frontend's `/health` lists one generate instance fewer, and
    generations sent meanwhile are served by instances still listed; restore it; within the
    same bound as many instances are listed as before, and a generation is served."""
    worker, family = the_worker(rl_target, rl_admin, rl_admin_workers)
    controls = stop_controls(rl_target, family, worker)
    if not controls:
        raise FeatureAbsent(
            f"{worker.label} ({family.name if family else rl_target.backend}) advertises no "
            "control that takes it out of routing (the vLLM Python worker holds requests while "
            "paused, and does not advertise control/sleep)"
        )
    rounds = []
    timings: dict[str, dict[str, float]] = {}
    for control in controls:
        observed, measured = stop_round(rl_client, rl_target, rl_admin, worker, control)
        rounds.append(observed)
        timings[control.name] = measured
    rl_verdict.measure(stopped_worker_unrouted=timings)
    rl_verdict.check(membership.stopped_worker_unrouted(rounds))


DEPARTURE_S = 30.0
"""A departure reaches discovery and the frontend within this (measured with Dynamo 1.6.1 and
file discovery: at once for a worker that unregisters as it stops)."""
RETURN_S = 90.0
"""A restarted worker of ours is listed again within this (measured: a few seconds)."""


def usable_workers(client: Client, target: Target) -> int:
    """Workers `/v1/rl/workers` lists with routes and no `error`."""
    body = client.get(target.rl("/v1/rl/workers"), deadline_s=HEALTH_S).reply()
    return sum(
        1 for worker in discovery.workers_of(body) if worker.get("routes") and "error" not in worker
    )


@capability(contract.discovery.DEPARTURE_VISIBLE)
@pytest.mark.needs(WORKER_DEPARTURE)
def test_a_departed_worker_leaves_routing_and_discovery_says_so(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_probe: WorkerDepartureProbe,
) -> None:
    """The last worker's process stops: within `DEPARTURE_S` the frontend's `/health` lists one
    generate instance fewer and, where the backend registers with `/v1/rl/workers`, discovery
    lists one usable worker fewer (dropped, or kept with an `error` and no routes, as Dynamo
    1.6.1 does until the registration expires). Started again, it is listed usable and routed
    within `RETURN_S`."""
    discovered = bool(rl_target.rl_url) and RL_WORKERS[Backend(rl_target.backend)] is (
        Support.SUPPORTED
    )
    routed_before = len(listed(rl_client, rl_target))
    usable_before = usable_workers(rl_client, rl_target) if discovered else None
    if not usable_before:
        # Discovery lists no usable worker (a defect the discovery rows judge): only the
        # frontend's side of the departure is observable.
        discovered, usable_before = False, None

    def gone() -> tuple[int, int | None]:
        return (
            len(listed(rl_client, rl_target)),
            usable_workers(rl_client, rl_target) if discovered else None,
        )

    def settled(
        done: Callable[[int, int | None], bool], bound_s: float
    ) -> tuple[int, int | None, float]:
        started = time.monotonic()
        while True:
            routed, usable = gone()
            elapsed = time.monotonic() - started
            if done(routed, usable) or elapsed >= bound_s:
                return routed, usable, elapsed
            time.sleep(POLL_S)

    rl_probe.depart_worker()
    try:
        routed_gone, usable_gone, left_s = settled(
            lambda routed, usable: (
                routed < routed_before
                and (usable_before is None or (usable is not None and usable < usable_before))
            ),
            DEPARTURE_S,
        )
    finally:
        rl_probe.return_worker()
    routed_back, usable_back, back_s = settled(
        lambda routed, usable: (
            routed >= routed_before
            and (usable_before is None or (usable is not None and usable >= usable_before))
        ),
        RETURN_S,
    )
    whole = routed_back >= routed_before and (
        usable_before is None or (usable_back is not None and usable_back >= usable_before)
    )
    rl_verdict.measure(departure={"left_s": round(left_s, 3), "returned_s": round(back_s, 3)})
    rl_verdict.check(
        membership.departure_visible(
            membership.Departure(
                bound_s=DEPARTURE_S,
                routed_before=routed_before,
                routed_while_gone=routed_gone,
                usable_before=usable_before,
                usable_while_gone=usable_gone,
                whole_again=whole,
            )
        )
    )
