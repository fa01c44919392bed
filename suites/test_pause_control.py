"""Pause control beyond the happy path: an invalid mode changes nothing, pauses and resumes sent
twice, or at once, are all answered and leave the worker serving, and an update sent to a running
worker that requires a pause is refused (`checks.pause`)."""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rl_conformance import FeatureAbsent, Unobservable, contract
from rl_conformance.checks import pause
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import (
    Selection,
    await_rejoin,
    instance_of,
    require_update_routes,
    resume_until_served,
    routed_now,
    select,
)
from rl_conformance.control.each_worker import label, on_worker, pins, require_observed
from rl_conformance.control.families import AdminFamily
from rl_conformance.control.inflight import FIRST_TOKEN_S, InFlightStream, first_token_s
from rl_conformance.control.pause_probes import each_first_token_s
from rl_conformance.control.refresh import pinned_generation
from rl_conformance.control.weights import WeightSource
from rl_conformance.control.worker_meter import WorkerMeter
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
PROMPT = [640, 1024, 777, 1800, 512, 333, 901, 445]
NOT_A_MODE = "drain-conformance"
"""A pause mode no engine has."""
ANSWER_S = 10.0
"""A pause with nothing in flight, or a resume, is answered within this."""
HELD_S = 0.6
HELD_FACTOR = 5
"""A first token within this many times the worker's unpaused first-token time (at least
HELD_S) came promptly."""
HOLD_FACTOR = 20
HOLD_FLOOR_S = 5.0
"""A probe that delivers nothing for this many times the unpaused first-token time (at least
HOLD_FLOOR_S) may be held; it is held only if its first token then follows the resume promptly."""
PROBE_TOKENS = 8


def resume_all(rl_admin: AdminClient, chosen: Selection) -> None:
    """Resume every selected worker whatever state a step left it in (a resume of a running
    worker is answered `ok`: `fixtures/dynamo-1.6.1/vllm-cpu/resume_while_not_paused.json`)."""
    with contextlib.suppress(Exception):
        rl_admin.call_each(chosen.workers, chosen.family.resume, {}, deadline_s=ANSWER_S)


def paused_now(rl_admin: AdminClient, worker: AdminWorker, family: AdminFamily) -> bool | None:
    """The family's pause probe (the native sidecar's `control/is_paused`), None without one."""
    if family.probe is None or family.probe not in (worker.routes or ()):
        return None
    found = rl_admin.call(worker, family.probe, {}, deadline_s=ANSWER_S).reply()
    value = found.get("is_paused") if isinstance(found, dict) else None
    return value if isinstance(value, bool) else None


@capability(contract.admin.INVALID_PAUSE_MODE)
@pytest.mark.may_end_worker("an invalid pause mode: SGLang 0.5.21 answers 200 ok, then exits")
def test_an_invalid_pause_mode_is_refused_and_changes_nothing(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """A pause in a mode the engine does not have is refused, naming the mode, and the worker
    keeps serving: read from the family's pause probe where it has one, else from a generation
    sent after the refusal, served when its first token arrives or its worker's own counters
    show it generating (a slow link may hold the token back; it cannot hold the counters). A
    reply the family calls a success fails the rule at once. The generation fails the rule only
    when it is held, with evidence no slow engine gives: nothing for `HOLD_FACTOR` times the
    worker's unpaused first-token time (at least `HOLD_FLOOR_S`), then its first token within
    `HELD_FACTOR` times that time of the resume. Slow on both sides of the resume, it proves
    nothing (inconclusive)."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family, worker = chosen.family, chosen.workers[0]
    pinned = instance_of(chosen)
    meter = WorkerMeter(rl_client, chosen.workers if pinned is None else [worker])
    unpaused_s = first_token_s(rl_verdict, rl_client, rl_target, PROMPT, pinned, PROBE_TOKENS)
    hold_s = max(HOLD_FLOOR_S, HOLD_FACTOR * unpaused_s)
    prompt_s = max(HELD_S, HELD_FACTOR * unpaused_s)
    probe = InFlightStream(
        rl_client, rl_target, PROMPT, instance_id=pinned, max_tokens=PROBE_TOKENS
    )
    try:
        exchange = rl_admin.call(worker, family.pause, {"mode": NOT_A_MODE}, deadline_s=ANSWER_S)
        # An acceptance breaks the rule whatever follows (SGLang 0.5.21 answers 200 ok, then
        # its scheduler fails an assertion and the worker exits): judged on the answer alone.
        accepted = pause.succeeded(family.name, family.pause, exchange.status, exchange.reply())
        paused = None if accepted else paused_now(rl_admin, worker, family)
        served = False
        if paused is None and not accepted:
            generating = meter.growing()
            probe.thread.start()
            served = probe.await_first(hold_s, generating, any_event=True) is not None
    finally:
        resume_all(rl_admin, chosen)
    if accepted:
        serving = True
    elif paused is not None:
        serving = not paused
    elif served:
        serving = True
    else:
        resumed = time.monotonic()
        came = probe.progress.wait_for_events(1, FIRST_TOKEN_S)
        after_s = time.monotonic() - resumed
        probe.wait()
        if not came or after_s > prompt_s:
            raise Unobservable(
                f"the probe generation delivered nothing for {hold_s:.1f} s before the resume "
                f"and {'nothing' if not came else f'its first token {after_s:.1f} s'} after it "
                f"(unpaused: {unpaused_s:.2f} s): a slow worker, not evidence of a pause"
            )
        serving = False
    probe.judge_terminal(rl_verdict)
    rl_verdict.measure(
        invalid_pause_mode={"unpaused_first_token_s": round(unpaused_s, 3), "hold_s": hold_s}
    )
    rl_verdict.check(
        pause.invalid_mode_refused(
            family.name, family.pause, NOT_A_MODE, exchange.status, exchange.reply(), serving
        ),
        exchange,
    )


def answered(
    family: AdminFamily, route: str, what: str, exchange: Exchange, *, must_succeed: bool
) -> pause.Answer:
    body = exchange.reply()
    return pause.Answer(
        what=what,
        status=exchange.status,
        body=body,
        error=exchange.error,
        must_succeed=must_succeed,
        succeeded=pause.succeeded(family.name, route, exchange.status, body),
    )


@capability(contract.admin.PAUSE_CYCLES)
@pytest.mark.may_end_worker("a second pause may never return (FastDeploy #7825)")
def test_pauses_and_resumes_sent_twice_or_at_once_are_all_answered(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """Pause, pause again, resume, resume again; then two pauses at once and a resume. Every
    call is answered within `ANSWER_S`: the first pause and each closing resume succeed, a
    repeated or concurrent call succeeds or is refused cleanly, at least one of the concurrent
    pauses succeeds, and afterwards the worker serves a generation. A generation sent after the
    first resume is served too: one that delivers nothing for `HOLD_FACTOR` times the worker's
    unpaused first-token time (at least `HOLD_FLOOR_S`) and then its first token within
    `HELD_FACTOR` times that time of the second resume was held by a pause counted per caller;
    slow on both sides of the second resume, it proves nothing and is not judged; it was served
    when its first token arrived or its worker's own counters showed it generating. Each selected
    worker goes through its own cycle, all at once, its generations pinned to it; where no
    worker's identity is known, every step goes to them all and the generations are unpinned."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    workers = pins(chosen)
    steps = [chosen.workers] if workers == (None,) else [[worker] for worker in workers]
    unpaused = each_first_token_s(rl_verdict, rl_client, rl_target, workers, PROMPT)
    routed = routed_now(rl_admin, rl_target)
    try:
        with ThreadPoolExecutor(max_workers=len(workers)) as pool:
            cycles = list(
                pool.map(
                    lambda args: cycle(rl_client, rl_target, rl_admin, chosen.family, *args),
                    zip(steps, workers, unpaused, strict=True),
                )
            )
    finally:
        resume_all(rl_admin, chosen)
    await_rejoin(rl_admin, rl_target, routed, chosen.pinned)
    rl_verdict.measure(
        pause_cycles={
            label(worker): {"unpaused_first_token_s": round(unpaused_s, 3)}
            for worker, unpaused_s in zip(workers, unpaused, strict=True)
        }
    )
    for worker, (answers, counted) in zip(workers, cycles, strict=True):
        served_after = pinned_generation(rl_client, rl_target, worker, PROMPT)
        # A counted pause shows in the sequence of calls, not in the generation served at the end.
        rl_verdict.check(
            on_worker(
                pause.pause_cycle_answered(answers, served_after.status == 200, counted), worker
            ),
            served_after if counted is None else None,
        )
    require_observed(chosen, "pauses and resumes sent twice or at once", rl_verdict)


def cycle(
    rl_client: Client,
    rl_target: Target,
    rl_admin: AdminClient,
    family: AdminFamily,
    workers: list[AdminWorker],
    pin: AdminWorker | None,
    unpaused_s: float,
) -> tuple[list[pause.Answer], str | None]:
    """One pause cycle sent to `workers` (one, or all when none can be observed alone), watched
    through a generation pinned to `pin`: every call's answer, and how the generation was held
    by a counted pause (None: it was not, or that proves nothing)."""
    body = family.pause_body()
    hold_s = max(HOLD_FLOOR_S, HOLD_FACTOR * unpaused_s)
    probe = InFlightStream(
        rl_client,
        rl_target,
        PROMPT,
        instance_id=None if pin is None else pin.instance_id,
        max_tokens=PROBE_TOKENS,
    )
    named = len(workers) > 1
    meter = WorkerMeter(rl_client, workers if pin is None else [pin])

    def call_each(
        route: str, what: str, *, must_succeed: bool, times: int = 1
    ) -> list[pause.Answer]:
        sent_to = [worker for worker in workers for _ in range(times)]
        exchanges = rl_admin.call_each(
            sent_to, route, body if route == family.pause else {}, deadline_s=ANSWER_S
        )
        return [
            answered(
                family,
                route,
                f"{what} on {worker.label}" if named else what,
                exchange,
                must_succeed=must_succeed,
            )
            for worker, exchange in zip(sent_to, exchanges, strict=True)
        ]

    answers: list[pause.Answer] = []
    counted: str | None = None
    try:
        answers += call_each(family.pause, "the first pause", must_succeed=True)
        answers += call_each(
            family.pause, "a second pause of the paused worker", must_succeed=False
        )
        answers += call_each(family.resume, "the resume", must_succeed=True)
        generating = meter.growing()
        probe.thread.start()
        served = probe.await_first(hold_s, generating, any_event=True) is not None
        answers += call_each(family.resume, "a resume of the running worker", must_succeed=False)
        if not served:
            counted = held_until_resumed(probe, unpaused_s, hold_s)
        concurrent = call_each(family.pause, "a concurrent pause", must_succeed=False, times=2)
        answers += concurrent
        for index, worker in enumerate(workers):
            if not any(answer.succeeded for answer in concurrent[2 * index : 2 * index + 2]):
                what = "both concurrent pauses" + (f" on {worker.label}" if named else "")
                answers.append(pause.Answer(what, 200, None, None, True, False))
        answers += call_each(family.resume, "the resume after them", must_succeed=True)
    finally:
        if any(answer.status is None for answer in answers):
            resume_until_served(rl_admin, rl_target, family, workers)
        else:
            with contextlib.suppress(Exception):
                rl_admin.call_each(workers, family.resume, {}, deadline_s=ANSWER_S)
        probe.wait()
    return answers, counted


def held_until_resumed(probe: InFlightStream, unpaused_s: float, hold_s: float) -> str | None:
    """How a probe that delivered nothing for `hold_s` after one resume was held until the
    resume just sent: its first token came within `HELD_FACTOR` times the unpaused first-token
    time of it. None when it came later, or not at all: a slow worker, not evidence."""
    resumed = time.monotonic()
    came = probe.progress.wait_for_events(1, FIRST_TOKEN_S)
    after_s = time.monotonic() - resumed
    if not came or after_s > max(HELD_S, HELD_FACTOR * unpaused_s):
        return None
    return (
        f"a generation sent after the first resume delivered nothing for {hold_s:.1f} s, then "
        f"its first token {after_s:.2f} s after a second resume (unpaused: {unpaused_s:.3f} s)"
    )


@capability(contract.admin.UNPAUSED_UPDATE_REFUSED)
def test_an_update_to_a_running_worker_is_refused(
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """The vLLM Python worker takes weights only while paused: an update sent to a running
    worker is refused, and the version it named is not reported afterwards. Other families
    document no such precondition (SGLang quiesces running requests itself; the sidecar's
    transfer lifecycle is judged by the refresh rows)."""
    if rl_target.backend != "vllm":
        raise FeatureAbsent(f"{rl_target.backend} workers take updates without a pause")
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family, worker = chosen.family, chosen.workers[0]
    if not rl_admin.policy.permits(worker.instance_id):  # a read-only run says why first
        raise rl_admin.policy.refusal(f"{family.update_routes[0]} on {worker.label}")
    if family.name != "vllm" or family.version is None:
        raise Unobservable(f"the {family.name} family documents no pause before an update")
    require_update_routes(chosen)
    resume_all(rl_admin, chosen)  # running, whatever an earlier step left
    policy = rl_weights.new(family, chosen.workers)
    call = family.update_calls(policy)[0]
    exchange = rl_admin.call(worker, call.route, dict(call.body), deadline_s=ANSWER_S)
    after = rl_admin.call(worker, family.version, {}, deadline_s=ANSWER_S).reply()
    rl_verdict.check(
        pause.unpaused_update_refused(
            family.name,
            call.route,
            exchange.status,
            exchange.reply(),
            family.read_version(after),
            policy.version,
        ),
        exchange,
    )
