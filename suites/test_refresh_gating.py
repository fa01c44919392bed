"""Policy refresh, the gate: a paused worker holds new generation until resume, and a pause that
names no mode does to a stream in flight what its family documents."""

from __future__ import annotations

import pytest

from rl_conformance import Unobservable
from rl_conformance.checks import control
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import await_rejoin, instance_of, routed_now, select
from rl_conformance.control.each_worker import label, on_worker, pins, require_observed
from rl_conformance.control.inflight import InFlightStream, Mark, first_token_s
from rl_conformance.control.pause_probes import (
    AnswerMarks,
    held_generation,
    wait_all,
    watch_s,
)
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
    """A pause that names no mode, with a stream in flight on each selected worker: the Python
    worker keeps it in place until resume, the native sidecar aborts it (vLLM's default), SGLang
    aborts it. Clients that omit the mode depend on this; the two vLLM families differ. What each
    stream had delivered when the pause was sent and when its own worker's pause answered
    decides, never how fast it ran: a stream that ran to its end before the pause was answered
    leaves its worker inconclusive (a pause that waited for it and one that arrived late look
    alike)."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    workers = pins(chosen)
    streams = [in_flight(rl_client, rl_target, worker) for worker in workers]
    own = AnswerMarks(workers, streams)
    routed = routed_now(rl_admin, rl_target)
    try:
        sent = [stream.start_and_wait_first_token(rl_verdict) for stream in streams]
        rl_admin.call_each(chosen.workers, family.pause, {}, on_answer=own.on_answer)
        answered = own.marks()
        if not all(mark.ended for mark in answered):
            wait_all(streams, HELD_S)
        at_resume = [stream.mark() for stream in streams]
    finally:
        try:
            rl_admin.call_each(chosen.workers, family.resume, {})
        finally:
            for stream in streams:
                stream.wait()
            await_rejoin(rl_admin, rl_target, routed, chosen.pinned)
    unjudged = []
    for worker, stream, *marks in zip(workers, streams, sent, answered, at_resume, strict=True):
        stream.judge_terminal(rl_verdict)
        observed, evidence = default_mode_observed(stream, *marks)
        if observed is None:
            unjudged.append(f"on {label(worker)}: {evidence}")
            continue
        rl_verdict.check(
            on_worker(
                control.pause_default_mode(
                    family.name, family.default_pause_mode, observed, evidence
                ),
                worker,
            ),
            stream.exchange,
        )
    if unjudged:
        raise Unobservable("; ".join(unjudged))
    require_observed(chosen, "a pause without a mode")


def default_mode_observed(
    stream: InFlightStream, sent: Mark, answered: Mark, at_resume: Mark
) -> tuple[str | None, str]:
    """The mode a stream's pause behaved as (`control.pause_default_mode`), and the evidence;
    None, with why, when what the stream shows depends on pace rather than on the pause."""
    evidence = (
        f"of {stream.max_tokens} tokens: {sent.describe()} when the pause was sent, "
        f"{answered.describe()} when it was answered, {at_resume.describe()} at resume, "
        f"{stream.mark().tokens} in all"
    )
    if answered.ended:
        if stream.completed():
            # A pause that waited for the stream and one that reached the worker only after the
            # stream's end look alike: which one it was depends on pace, so nothing is judged.
            return None, f"the stream ran to its end before the pause was answered ({evidence})"
        return "abort", evidence
    if at_resume.ended:
        if stream.completed() and stream.maybe_read_late(sent, answered, at_resume):
            return None, (
                "the stream ran to its end while paused, but what arrived then may have been "
                "generated before the pause took hold and read late: the pause call outlasted "
                f"that much of the stream, or it came faster than the stream ever ran ({evidence})"
            )
        return ("none" if stream.completed() else "abort"), evidence
    return ("keep" if stream.completed() else "abort"), evidence
