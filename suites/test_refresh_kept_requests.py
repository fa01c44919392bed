"""Policy refresh, the requests a caller asked to keep: a version rename that sent
`abort_all_requests: false` keeps the requests in flight, running or retracted by a pause, and a
version published while they are held is not stamped on the tokens made before it."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance import FeatureAbsent, Unobservable, contract
from rl_conformance.checks import held_requests, straddle, streaming, terminal
from rl_conformance.checks.base import MISSING, get_path
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import (
    Routed,
    Selection,
    paused,
    routed_now,
    select,
    succeed_each,
)
from rl_conformance.control.each_worker import label, on_worker, pins, require_observed
from rl_conformance.control.families import new_version
from rl_conformance.control.inflight import InFlightStream, Mark, in_flight_budget
from rl_conformance.control.pause_probes import streams_to
from rl_conformance.control.refresh_probes import PROMPT
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
RETRACT = "retract"
HELD = (None, RETRACT)
"""How the streams stand when the rename lands: running, or retracted by a pause."""
ROUTES = ("completions", "chat", "generate")
"""The streams a rename crosses: OpenAI-compatible completions and chat, SGLang's native one."""


def keeping_family(chosen: Selection, admin: AdminClient) -> None:
    """Skipped, as a case that does not apply (the row's other tests judge the family), where
    the family's rename offers no choice to keep the requests or it has no retract pause; on a
    worker the run may not change, skipped first for that, naming the flag that allows it."""
    first = chosen.workers[0]
    if not admin.policy.permits(first.instance_id):
        raise admin.policy.refusal(f"the version rename of {first.label}")
    family = chosen.family
    if family.set_version is None or family.rename_keeps is None:
        pytest.skip(
            f"the {family.name} family's version rename offers no choice to keep the requests "
            "in flight (only SGLang's update_weight_version aborts them, unless told "
            "abort_all_requests false)"
        )
    if RETRACT not in family.pause_modes:
        pytest.skip(f"the {family.name} family has no retract pause")


def rename(rl_verdict: Verdict, rl_admin: AdminClient, chosen: Selection, version: str) -> None:
    """The version-metadata call on every selected worker, asking to keep their requests."""
    call = chosen.family.set_version_call(version, keep_requests=True)
    assert call is not None  # keeping_family
    succeed_each(rl_verdict, rl_admin, chosen.workers, chosen.family, call.route, dict(call.body))


def across_rename(
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    chosen: Selection,
    streams: list[InFlightStream],
    held: str | None,
    version: str,
) -> list[Mark]:
    """Start `streams`, rename the version while they run (`held` None) or while a pause holds
    them (`held`: its mode), then let them end; each stream as it stood when the rename was
    sent."""
    routed = Routed(routed_now(rl_admin, chosen.target))
    try:
        for stream in streams:
            stream.start_and_wait_first_token(rl_verdict)
        if held is None:
            marks = [stream.mark() for stream in streams]
            rename(rl_verdict, rl_admin, chosen, version)
        else:
            with paused(rl_verdict, rl_admin, chosen, held, routed=routed):
                marks = [stream.mark() for stream in streams]
                rename(rl_verdict, rl_admin, chosen, version)
    finally:
        for stream in streams:
            stream.wait()
    return marks


def native_ending(events: list[Any]) -> tuple[int | None, Any]:
    """The ids a native stream delivered and its last event's finish reason."""
    payloads = [event for event in events if isinstance(event, dict)]
    counts = straddle.native_counts(payloads)
    last = payloads[-1] if payloads else {}
    return (counts[-1] if counts else None), get_path(last, "meta_info", "finish_reason")


@capability(contract.refresh.INFLIGHT_TERMINAL)
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("held", HELD, ids=["running", "retracted"])
def test_a_rename_that_keeps_requests_keeps_them(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    held: str | None,
    route: str,
) -> None:
    """SGLang's `update_weight_version` "changes metadata and can abort requests"; a caller that
    sends `abort_all_requests: false` asked to keep them, and a trainer that paused in `retract`
    to keep its requests and then publishes the version counts on it. A stream in flight on each
    selected worker (a completion or chat stream, or SGLang's native `/generate`), running or
    retracted by a pause, crosses such a rename: it runs to its length, not aborted. Where it
    ended before the rename was sent, nothing crossed it (inconclusive)."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    keeping_family(chosen, rl_admin)
    native, chat = route == "generate", route == "chat"
    if native and rl_target.backend != "sglang":
        pytest.skip(f"{rl_target.backend} serves no native SGLang /generate stream")
    workers = pins(chosen)
    budget = in_flight_budget(rl_client, rl_target, len(PROMPT))
    streams = streams_to(rl_client, rl_target, workers, PROMPT, budget, native=native, chat=chat)
    marks = across_rename(rl_verdict, rl_admin, chosen, streams, held, new_version())
    for worker, stream, mark in zip(workers, streams, marks, strict=True):
        if mark.ended:
            raise Unobservable(
                f"the stream had ended ({mark.describe()}) when the rename was sent: none "
                "crossed it"
            )
        exchange = stream.exchange
        if native:
            events = rl_verdict.events(exchange, schema="sglang-generate-chunk")
            delivered, finish = native_ending(events)
            where = "meta_info"
        else:
            ending = terminal.ending_from_fold(rl_verdict.folded(exchange))
            ids = ending.completion_ids
            delivered, finish, where = (
                (None if ids is None else len(ids)),
                ending.finish_reason,
                "choices[0]",
            )
        state = exchange.state.value if exchange.state else "none"
        rl_verdict.check(
            on_worker(streaming.terminal_success(state, exchange.state_reason), worker), exchange
        )
        result = held_requests.rename_keeps_requests(delivered, stream.max_tokens, finish, where)
        rl_verdict.check(on_worker(result, worker), exchange)
    require_observed(chosen, "a stream kept across a version rename")


@capability(contract.refresh.STRADDLE_REPORTED)
def test_a_version_published_while_paused_names_only_later_tokens(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """A version published while a request is held names only the tokens made after it: the
    ones made before the pause belong to the version before (a sample stamped with the version
    at its completion looks fresher than it is). Each selected worker is named a known version,
    a native SGLang stream is started on it, paused in `retract` once its first event arrived,
    renamed (keeping the request), and resumed: every event read before the rename names the
    old version and the spans put those tokens under it (`checks.straddle`)."""
    if rl_target.backend != "sglang":
        raise FeatureAbsent(
            f"{rl_target.backend} names no weight version per token: only SGLang's native "
            "stream carries meta_info.weight_version and weight_versions"
        )
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    keeping_family(chosen, rl_admin)
    old = new_version()
    rename(rl_verdict, rl_admin, chosen, old)
    workers = pins(chosen)
    budget = in_flight_budget(rl_client, rl_target, len(PROMPT))
    streams = streams_to(rl_client, rl_target, workers, PROMPT, budget, native=True)
    version = new_version()
    marks = across_rename(rl_verdict, rl_admin, chosen, streams, RETRACT, version)
    unfollowed: list[str] = []
    for worker, stream, mark in zip(workers, streams, marks, strict=True):
        if mark.ended:
            raise Unobservable(
                f"the stream had ended ({mark.describe()}) when the pause answered: none was "
                "held across the rename"
            )
        exchange = stream.exchange
        events = rl_verdict.events(exchange, schema="sglang-generate-chunk")
        trail = straddle.trail_from_native_events(events, mark.tokens)
        if not trail.names_versions:
            raise FeatureAbsent(
                "no event of SGLang's /generate stream carries meta_info.weight_version or "
                "meta_info.weight_versions"
            )
        record = trail.spans if trail.spans is not MISSING else trail.events[-1].version
        reached = rl_verdict.check(
            on_worker(held_requests.rename_reaches_token_versions(record, (old, version)), worker),
            exchange,
        )
        if rl_verdict.differs(reached):
            unfollowed.append(label(worker))
            continue
        rl_verdict.check(
            on_worker(straddle.straddle_reported(trail, old, version), worker), exchange
        )
    if unfollowed:
        raise Unobservable(
            f"the per-token versions of {', '.join(unfollowed)} do not follow "
            "update_weight_version (a release difference, flagged): the tokens' versions across "
            "a version published while paused are not judged"
        )
    require_observed(chosen, "a version published while a request was held")
