"""Routing membership under administration: a worker taken out of routing (paused, its memory
released, put to sleep) leaves the instances the frontend routes to, serves nothing meanwhile,
and rejoins when restored (`checks.membership`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from rl_conformance import FeatureAbsent, Unobservable
from rl_conformance.checks import membership, pause
from rl_conformance.checks.base import describe
from rl_conformance.client.http import Client
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
from rl_conformance.model.target import Target
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
        if control.absent_unless and not stop.succeeded and stop.status in range(200, 500):
            raise FeatureAbsent(
                f"{worker.label} refused {control.stop} (HTTP {stop.status}: "
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


@capability("admin.stopped_worker_unrouted")
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
