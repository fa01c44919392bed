"""Policy refresh, the gate: a paused worker holds new generation until resume, and a pause that
names no mode does to a stream in flight what its family documents."""

from __future__ import annotations

import pytest

from rl_conformance import Unobservable, contract
from rl_conformance.checks import control, pause_modes
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import instance_of, select
from rl_conformance.control.each_worker import label, on_worker, require_observed
from rl_conformance.control.inflight import first_token_s
from rl_conformance.control.pause_probes import crossings, held_generation, watch_s
from rl_conformance.control.refresh_probes import PROMPT
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
HELD_S = 0.6
HELD_TOKENS = 8


@capability(contract.refresh.PAUSE_GATES)
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
    require_observed(chosen, "a generation sent to a paused worker", rl_verdict)


@capability(contract.refresh.PAUSE_GATES)
def test_pause_without_a_mode_follows_the_documented_default(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """A pause that names no mode, with a stream in flight on each selected worker: the Python
    worker keeps it in place until resume, the native sidecar aborts it (vLLM's default), SGLang
    aborts it. Clients that omit the mode depend on this; the two vLLM families differ. What the
    engine did decides, never how fast the stream arrived (`pause_modes.behaved_as`): a stream
    cut short was aborted; one its worker generated while paused was not held; one its worker
    had generated when the pause answered leaves its worker inconclusive (a pause that waited for
    it and one that arrived late look alike)."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    observed = crossings(
        rl_verdict,
        rl_client,
        rl_target,
        rl_admin,
        chosen,
        None,
        PROMPT,
        HELD_S,
        judge_terminals=True,
    )
    unjudged = []
    for worker, crossing, exchange in observed:
        behaved, evidence = pause_modes.behaved_as(crossing)
        if behaved is None:
            unjudged.append(f"on {label(worker)}: {evidence}")
            continue
        rl_verdict.check(
            on_worker(
                control.pause_default_mode(
                    family.name, family.default_pause_mode, behaved, evidence
                ),
                worker,
            ),
            exchange,
        )
    if unjudged:
        raise Unobservable("; ".join(unjudged))
    require_observed(chosen, "a pause without a mode", rl_verdict)
