"""Policy refresh, the gate: a paused worker holds new generation until resume, and a pause that
names no mode does to a stream in flight what its family documents."""

from __future__ import annotations

import pytest

from rl_conformance import Unobservable
from rl_conformance.checks import control
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import await_rejoin, instance_of, routed_now, select
from rl_conformance.control.each_worker import on_worker, require_observed
from rl_conformance.control.inflight import first_token_s
from rl_conformance.control.pause_probes import held_generation, watch_s
from rl_conformance.control.refresh_probes import PROMPT, in_flight
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
HELD_S = 0.6
HELD_TOKENS = 8


@capability("refresh.pause_gates")
def test_pause_holds_new_generation_until_resume(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """A generation sent to a paused worker delivers no token until resume: it is held, then
    completes, or it is refused (the native sidecar answers 503 while paused), and one sent
    after resume completes; on every selected worker, each by a generation pinned to it. The
    hold is sized from the worker's own pace, so a slow engine cannot pass by being slow."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    measured = first_token_s(
        rl_verdict, rl_client, rl_target, PROMPT, instance_of(chosen), HELD_TOKENS
    )
    held_s = watch_s(measured)
    for held in held_generation(rl_verdict, rl_client, rl_target, rl_admin, chosen, PROMPT, held_s):
        rl_verdict.check(
            on_worker(control.pause_gates(held.while_paused, held.completed, held_s), held.worker),
            held.exchange,
        )
    require_observed(chosen, "a generation sent to a paused worker")


@capability("refresh.pause_gates")
def test_pause_without_a_mode_follows_the_documented_default(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """A pause that names no mode, with a stream in flight: the Python worker keeps it in place
    until resume, the native sidecar aborts it (vLLM's default), SGLang aborts it. Clients that
    omit the mode depend on this; the two vLLM families differ. What the stream had delivered
    when the pause was sent and answered decides, never how fast it ran: a stream that ran to its
    end before the pause was answered leaves the test inconclusive (a pause that waited for it
    and one that arrived late look alike)."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    stream = in_flight(rl_client, rl_target, chosen)
    routed = routed_now(rl_admin, rl_target)
    sent = stream.start_and_wait_first_token(rl_verdict)
    try:
        rl_admin.call_each(chosen.workers, family.pause, {})
        answered = stream.mark()
        if not answered.ended:
            stream.wait(HELD_S)
        at_resume = stream.mark()
    finally:
        try:
            rl_admin.call_each(chosen.workers, family.resume, {})
        finally:
            stream.wait()
            await_rejoin(rl_admin, rl_target, routed, chosen.pinned)
    stream.judge_terminal(rl_verdict)
    evidence = (
        f"of {stream.max_tokens} tokens: {sent.describe()} when the pause was sent, "
        f"{answered.describe()} when it was answered, {at_resume.describe()} at resume, "
        f"{stream.mark().tokens} in all"
    )
    if answered.ended:
        if stream.completed():
            # A pause that waited for the stream and one that reached the worker only after the
            # stream's end look alike: which one it was depends on pace, so nothing is judged.
            raise Unobservable(
                f"the stream ran to its end before the pause was answered ({evidence})"
            )
        observed = "abort"
    elif at_resume.ended:
        if stream.completed() and stream.maybe_read_late(sent, answered, at_resume):
            raise Unobservable(
                "the stream ran to its end while paused, but what arrived then may have been "
                "generated before the pause took hold and read late: the pause call outlasted "
                f"that much of the stream, or it came faster than the stream ever ran ({evidence})"
            )
        observed = "none" if stream.completed() else "abort"
    else:
        observed = "keep" if stream.completed() else "abort"
    rl_verdict.check(
        control.pause_default_mode(family.name, family.default_pause_mode, observed, evidence),
        stream.exchange,
    )
