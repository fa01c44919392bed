"""What each pause mode does to generation, judged by its effect and never by the pause's answer
nor by when tokens arrived (`checks.pause_modes`): a stream in flight is cut by `abort`, finished
before a `wait` answers, held by `keep`/`in_place` until the resume and continued after it; a
request sent once a pause answered produces nothing before the resume, in every mode; and a
generation sent right after a resume, the first after two pauses included, is served promptly.
Each effect is judged on every selected worker (`control.each_worker`)."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest

from rl_conformance import Unobservable, contract
from rl_conformance.checks import control, pause_modes
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import Selection, resume_until_served, select
from rl_conformance.control.each_worker import label, on_worker, pins, require_observed
from rl_conformance.control.families import AdminFamily
from rl_conformance.control.pause_probes import (
    crossings,
    each_first_token_s,
    first_tokens_after,
    held_generation,
    watch_s,
)
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
PROMPT = [640, 1024, 777, 1800, 512, 333, 901, 445, 1203, 377, 1500, 1234]
ANSWER_S = 10.0
RESUME_FACTOR = 10
RESUME_FLOOR_S = 1.5
"""A generation after a resume is prompt within this many times the worker's unpaused
first-token time, and never held to less than `RESUME_FLOOR_S`: below that, how a loaded
client is scheduled decides, not the worker."""
RESUME_WAIT_FACTOR = 20
RESUME_WAIT_FLOOR_S = 5.0
"""How long a generation after a resume is waited for before it counts as not served."""


def mode_at(family: AdminFamily, index: int) -> str:
    if index >= len(family.pause_modes):
        pytest.skip(f"{family.name} has {len(family.pause_modes)} pause modes")
    return family.pause_modes[index]


def unpaused_first_token_s(
    verdict: Verdict, client: Client, target: Target, chosen: Selection
) -> float:
    """The slowest selected worker's unpaused first-token time: what a watch over them all is
    sized from."""
    return max(each_first_token_s(verdict, client, target, pins(chosen), PROMPT))


@capability(contract.refresh.PAUSE_MODE_EFFECT)
@pytest.mark.parametrize("mode_index", [0, 1, 2])
def test_each_pause_mode_does_to_a_stream_in_flight_what_it_names(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    mode_index: int,
) -> None:
    """A long stream in flight when a pause is sent in each of the family's modes, watched while
    paused for `WATCH_FACTOR` times the worker's unpaused first-token time, and judged by what
    the engine did, whatever the link between the suite and the frontend: `abort` cut it short,
    saying so; `wait` answered only once its worker had generated it to its length;
    `keep`/`in_place`/`retract` held it (its end never read before the resume) and ran it to its
    length after; in every mode the worker generated nothing while paused, by its own counters. A
    worker that accepts a mode and applies another (a wrapper that never forwards it) fails; a
    stream its worker had generated to its end before the pause could take hold proves
    nothing."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    mode = mode_at(chosen.family, mode_index)
    unpaused_s = unpaused_first_token_s(rl_verdict, rl_client, rl_target, chosen)
    observed = crossings(
        rl_verdict, rl_client, rl_target, rl_admin, chosen, mode, PROMPT, watch_s(unpaused_s)
    )
    rl_verdict.measure(
        pause_mode_effect={
            "mode": mode,
            "unpaused_first_token_s": round(unpaused_s, 3),
            "streams": {label(worker): crossing.describe() for worker, crossing, _ in observed},
        }
    )
    unjudged = []
    for worker, crossing, exchange in observed:
        why = pause_modes.unjudged(crossing)
        if why is not None:
            unjudged.append(f"on {label(worker)}: {why}")
            continue
        rl_verdict.check(on_worker(pause_modes.pause_mode_effect(crossing), worker), exchange)
    if unjudged:
        raise Unobservable("; ".join(unjudged))
    require_observed(chosen, f"what a {mode!r} pause does to a stream in flight", rl_verdict)


@capability(contract.refresh.PAUSE_GATES)
@pytest.mark.parametrize("mode_index", [0, 1, 2])
def test_a_request_sent_once_a_pause_answered_waits_for_the_resume(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    mode_index: int,
) -> None:
    """In every mode, a generation sent just after the pause answered delivers nothing until the
    resume, then completes (or is refused while paused, and served after): a pause that gates
    only what it found in flight lets a request in under the old weights, to be served by the
    new ones (vllm-project/vllm #33926, #51476). Its first token is awaited for the watch the
    worker's own unpaused first-token time sets, and counted before the resume is sent."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    mode = mode_at(chosen.family, mode_index)
    held_s = watch_s(unpaused_first_token_s(rl_verdict, rl_client, rl_target, chosen))
    held = held_generation(rl_verdict, rl_client, rl_target, rl_admin, chosen, PROMPT, held_s, mode)
    rl_verdict.measure(paused_request={"mode": mode, "held_s": round(held_s, 3)})
    for one in held:
        rl_verdict.check(
            on_worker(control.pause_gates(one.while_paused, one.completed, held_s), one.worker),
            one.exchange,
        )
    require_observed(chosen, f"a request sent once a {mode!r} pause answered", rl_verdict)


def resume_once(rl_admin: AdminClient, chosen: Selection) -> None:
    rl_admin.call_each(chosen.workers, chosen.family.resume, {}, deadline_s=ANSWER_S)


@capability(contract.admin.RESUME_SERVES_PROMPTLY)
def test_a_generation_right_after_a_resume_is_served_promptly(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """Pause and resume; then pause twice and resume once: a generation sent right after each
    resume answered has its first token within `RESUME_FACTOR` times the worker's unpaused
    first-token time (at least `RESUME_FLOOR_S`), measured on the same worker once the cycles
    are over and before them (the lower of the two, so a hold an earlier step left cannot widen
    the bound). Every selected worker is probed at once, each by a generation pinned to it and
    timed from the same resume. Where one was late, the cycles are taken once more: a resume
    that answers ok while generation stays held fails when it does so again."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    workers = pins(chosen)
    before_s = each_first_token_s(rl_verdict, rl_client, rl_target, workers, PROMPT)
    wait_s = max(RESUME_WAIT_FLOOR_S, RESUME_WAIT_FACTOR * max(before_s))
    body = family.pause_body()
    probes = []

    def cycles() -> list[list[pause_modes.AfterResume]]:
        """Each worker's first generation after each resume of the two cycles."""
        after: list[list[pause_modes.AfterResume]] = [[] for _ in workers]

        def probe_each(what: str) -> bool:
            """Whether every worker's generation after `what` delivered its first token."""
            found = first_tokens_after(rl_client, rl_target, workers, PROMPT, what, wait_s)
            for index, (first, probe) in enumerate(found):
                after[index].append(first)
                probes.append(probe)
            return all(first.first_token_s is not None for first, _ in found)

        try:
            rl_admin.call_each(chosen.workers, family.pause, body, deadline_s=ANSWER_S)
            resume_once(rl_admin, chosen)
            probe_each("the resume")
            abandoned = False
            for _ in range(2):  # a second pause of a paused worker may be refused: not judged
                exchanges = rl_admin.call_each(
                    chosen.workers, family.pause, body, deadline_s=ANSWER_S
                )
                abandoned |= any(exchange.status is None for exchange in exchanges)
            resume_once(rl_admin, chosen)
            if not probe_each("the first resume after two pauses"):
                resume_once(rl_admin, chosen)  # release what the one resume left held
            if abandoned:
                resume_until_served(rl_admin, rl_target, family, chosen.workers)
        except BaseException:
            with contextlib.suppress(Exception):
                resume_once(rl_admin, chosen)
            raise
        return after

    try:
        after = cycles()
        after_s = each_first_token_s(rl_verdict, rl_client, rl_target, workers, PROMPT)
        unpaused = [min(first_s, last_s) for first_s, last_s in zip(before_s, after_s, strict=True)]
        bounds = [max(RESUME_FLOOR_S, RESUME_FACTOR * unpaused_s) for unpaused_s in unpaused]
        if any(
            not item.within(bound_s)
            for items, bound_s in zip(after, bounds, strict=True)
            for item in items
        ):
            again = cycles()
            after = [
                [
                    item if item.within(bound_s) else replace(item, again=repeated)
                    for item, repeated in zip(items, repeats, strict=True)
                ]
                for items, repeats, bound_s in zip(after, again, bounds, strict=True)
            ]
    finally:
        for probe in probes:
            probe.wait()
    measured = {}
    for worker, items, unpaused_s, bound_s in zip(workers, after, unpaused, bounds, strict=True):
        measured[label(worker)] = {
            "unpaused_first_token_s": round(unpaused_s, 3),
            "bound_s": round(bound_s, 3),
            "after_resume_s": [_rounded(a) for a in items],
            **(
                {"again_s": [_rounded(a.again) for a in items if a.again is not None]}
                if any(a.again is not None for a in items)
                else {}
            ),
        }
        rl_verdict.check(
            on_worker(pause_modes.resume_serves_promptly(items, unpaused_s, bound_s), worker)
        )
    rl_verdict.measure(resume_serves_promptly=measured)
    require_observed(chosen, "a generation right after a resume", rl_verdict)


def _rounded(item: pause_modes.AfterResume | None) -> float | None:
    return None if item is None or item.first_token_s is None else round(item.first_token_s, 3)
