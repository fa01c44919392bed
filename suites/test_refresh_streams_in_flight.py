"""Policy refresh, the streams in flight: a stream open across a version rename, a pause in place
and an update, or a refresh in each pause mode ends exactly once and names the versions it was
generated under; one held across an update reports finite logprobs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rl_conformance import FeatureAbsent, Unobservable, contract
from rl_conformance.checks import control, logprobs, pause_modes, straddle, streaming
from rl_conformance.checks.base import MISSING
from rl_conformance.checks.stream_fold import StreamFold
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import (
    Judge,
    Routed,
    Selection,
    apply_update,
    paused,
    refusal_flagged,
    routed_now,
    select,
    succeed_each,
    update_all,
)
from rl_conformance.control.each_worker import label, on_worker, pins, require_observed
from rl_conformance.control.families import AdminFamily, new_version
from rl_conformance.control.inflight import InFlightStream, Mark, in_flight_budget
from rl_conformance.control.pause_probes import ended_native_crossing, streams_to
from rl_conformance.control.refresh_probes import PROMPT, in_flight
from rl_conformance.control.weights import WeightSource
from rl_conformance.control.worker_meter import WorkerMeter
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
WAIT_TOKENS = 64
STREAMS = 3
"""Streams held across one pause: each must end once, whatever the others do."""


def ended_successfully(rl_verdict: Verdict, exchange: Exchange, worker: AdminWorker | None) -> None:
    state = exchange.state.value if exchange.state else "none"
    rl_verdict.check(
        on_worker(streaming.terminal_success(state, exchange.state_reason), worker), exchange
    )


def ended_once(
    rl_verdict: Verdict, stream: InFlightStream, worker: AdminWorker | None = None
) -> StreamFold:
    """The stream as folded, after requiring one terminal per choice, terminal success, and a
    terminal true of what the stream returned (`InFlightStream.judge_terminal`); a violation
    names `worker`, the one the stream was pinned to."""
    exchange = stream.exchange
    fold = rl_verdict.folded(exchange)
    rl_verdict.check(on_worker(streaming.single_terminal(fold), worker), exchange)
    ended_successfully(rl_verdict, exchange, worker)
    stream.judge_terminal(rl_verdict)
    return fold


@capability(contract.refresh.INFLIGHT_TERMINAL)
def test_a_stream_in_flight_across_a_version_rename_ends_once_and_says_if_cut(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """The version-metadata route names the weights without replacing them; SGLang's
    `update_weight_version` also aborts in-flight requests unless told otherwise
    (`abort_all_requests` defaults to true). A stream open across it ends exactly once, and one
    it cut short says `cancelled` (Dynamo reports the abort as finish `stop`): one stream on each
    selected worker, sent before the rename reached any of them."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    call = family.set_version_call(new_version())
    if call is None:
        raise FeatureAbsent(f"the {family.name} family has no version-metadata route")
    workers = pins(chosen)
    streams = [in_flight(rl_client, rl_target, worker) for worker in workers]
    try:
        for stream in streams:
            stream.start_and_wait_first_token(rl_verdict)
        succeed_each(rl_verdict, rl_admin, chosen.workers, family, call.route, dict(call.body))
    finally:
        for stream in streams:
            stream.wait()
    for worker, stream in zip(workers, streams, strict=True):
        ended_once(rl_verdict, stream, worker)
    require_observed(chosen, "a stream in flight across a version rename", rl_verdict)


IN_PLACE_MODES = ("keep", "in_place")
"""Pause modes that hold requests where they are, to continue under the weights loaded meanwhile."""
HOLDING_MODES = (*IN_PLACE_MODES, "retract")
"""Pause modes after which the requests in flight continue under the weights loaded meanwhile:
in place, or (SGLang's `retract`) returned to the queue with the tokens they produced, and
recomputed at the resume."""


def straddle_mode(family: AdminFamily) -> str | None:
    """The pause a sample is held in across an update: the family's refresh pause where it holds
    requests (SGLang's `retract`, the mode that leaves the cache the update flushes flushable:
    an update in an `in_place` pause holding a request kills SGLang 0.5.21's worker and is
    refused by 0.5.23's, `fixtures/KNOWN_DIFFERENCES.md`), else its first in-place mode."""
    if family.refresh_mode in HOLDING_MODES and family.refresh_mode in family.pause_modes:
        return family.refresh_mode
    return next((m for m in family.pause_modes if m in IN_PLACE_MODES), None)


@capability(contract.refresh.STRADDLE_REPORTED)
@pytest.mark.may_end_worker(
    "an update while a pause holds a request (in_place: SGLang 0.5.21 exits)"
)
def test_a_sample_held_across_an_update_names_the_versions_of_its_tokens(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """A native SGLang stream on each selected worker is held by a pause (once its first event
    arrived or its worker's counters show it generating; `straddle_mode`: SGLang's `retract`),
    its worker updated to a new version, and resumed: the tokens before the update are the old
    policy's, the rest may be the new one's. The versions each event and span names must be
    true of that (`checks.straddle`); whether the straddle was shown, and at which output token
    the new version begins, are measured: the pause holds the request still, but which tokens
    the client had read by each step depends on the link's pace."""
    if rl_target.backend != "sglang":
        raise FeatureAbsent(
            f"{rl_target.backend} names no weight version per token: vLLM before 0.34 "
            "(`return_weight_versions`) and TensorRT-LLM have no such field, and Dynamo sends "
            "nvext.engine_data on the finish chunk only"
        )
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    mode = straddle_mode(family)
    if mode is None:
        raise FeatureAbsent(f"the {family.name} family has no pause that keeps requests in place")
    old_version = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
    budget = in_flight_budget(rl_client, rl_target, len(PROMPT))
    workers = pins(chosen)
    streams = streams_to(rl_client, rl_target, workers, PROMPT, budget, native=True)
    meters = {
        id(stream): WorkerMeter(rl_client, chosen.workers if worker is None else [worker])
        for worker, stream in zip(workers, streams, strict=True)
    }
    sent, before, version = across_update(
        rl_verdict,
        rl_admin,
        rl_weights,
        chosen,
        mode,
        streams,
        lambda stream: native_first_token(stream, meters[id(stream)].growing()),
    )
    measured: dict[str, Any] = {}
    unjudged: list[str] = []
    for worker, stream, sent_mark, before_mark in zip(workers, streams, sent, before, strict=True):
        try:
            measured[label(worker)] = judge_straddle(
                rl_verdict, stream, worker, mode, (sent_mark, before_mark), (old_version, version)
            )
        except (Unobservable, FeatureAbsent) as why:
            if isinstance(why, FeatureAbsent) and len(workers) == 1:
                raise
            unjudged.append(f"on {label(worker)}: {why}")
    rl_verdict.measure(sample_versions=measured)
    if unjudged:
        raise Unobservable("; ".join(unjudged))
    require_observed(chosen, "a sample held across an update", rl_verdict)


def across_update(
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_weights: WeightSource,
    chosen: Selection,
    mode: str,
    streams: list[InFlightStream],
    start: Callable[[InFlightStream], Mark],
    judge: Judge | None = None,
) -> tuple[list[Mark], list[Mark], Any]:
    """Start `streams`, pause the chosen workers in `mode`, update them, resume, and let the
    streams end: each stream as it stood when started and once the pause answered, and the
    version the update declared. The frontend's routing is read before the streams start, so
    that the pause follows their first tokens at once, whatever the link."""
    routed = Routed(routed_now(rl_admin, chosen.target))
    try:
        sent = [start(stream) for stream in streams]
        with paused(rl_verdict, rl_admin, chosen, mode, routed=routed):
            answered = [stream.mark() for stream in streams]
            version = update_all(rl_verdict, rl_admin, chosen, rl_weights, judge=judge)
    finally:
        for stream in streams:
            stream.wait()
    return sent, answered, version


def native_first_token(stream: InFlightStream, generating: Callable[[], bool] | None) -> Mark:
    """Start a native stream and wait for its first event, or for its worker's counters to show
    it generating (`generating`); a route the deployment does not serve says so."""
    try:
        return stream.start_and_wait_first_token(None, generating)
    except Unobservable:
        stream.wait()
        refused = stream.result.get("exchange")
        if refused is not None and refused.status in {404, 405, 501}:
            raise Unobservable(
                f"POST /generate answered HTTP {refused.status}: SGLang's native stream, the "
                "channel that names a version per output, is not served"
            ) from None
        raise


def judge_straddle(
    rl_verdict: Verdict,
    stream: InFlightStream,
    worker: AdminWorker | None,
    mode: str,
    marks: tuple[Mark, Mark],
    versions: tuple[Any, Any],
) -> dict[str, Any]:
    """One worker's native stream held across the update: the versions it names judged
    (`checks.straddle`), and what it showed, to measure."""
    sent, before = marks
    old_version, version = versions
    exchange = stream.exchange
    events = rl_verdict.events(exchange, schema="sglang-generate-chunk")
    if before.ended:
        # Ended before the update: run to its end, it did not cross it; cut short, the pause
        # that holds requests in place ended it.
        ended = ended_native_crossing(mode, stream.max_tokens, sent.tokens, before.tokens, events)
        why = pause_modes.unjudged(ended)
        if why is not None:
            raise Unobservable(f"{why}: it did not cross the update")
        rl_verdict.check(on_worker(pause_modes.pause_mode_effect(ended), worker), exchange)
    ended_successfully(rl_verdict, exchange, worker)
    trail = straddle.trail_from_native_events(events, before.tokens)
    if not trail.names_versions:
        raise FeatureAbsent(
            "no event of SGLang's /generate stream carries meta_info.weight_version or "
            "meta_info.weight_versions"
        )
    named = trail.versions_named()
    rl_verdict.check(
        on_worker(straddle.straddle_reported(trail, old_version, version), worker), exchange
    )
    return {
        "versions": [str(v) for v in named],
        "straddle_shown": len(named) > 1,
        "tokens": trail.tokens,
        "tokens_read_before_update": trail.known_old,
        "spans": trail.spans is not MISSING,
        "new_version_from": straddle.first_token_of(trail, version),
        "mode": mode,
    }


@capability(contract.refresh.INFLIGHT_TERMINAL)
@pytest.mark.parametrize("mode_index", [0, 1, 2])
@pytest.mark.may_end_worker("an update in an in-place pause: SGLang 0.5.21 exits")
def test_streams_in_flight_across_a_refresh_end_in_one_terminal_state(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
    mode_index: int,
) -> None:
    """`STREAMS` streams (at least one per selected worker) open while their workers are paused
    (each mode) and updated each end exactly once: completed, or aborted and saying so, or
    resumed; none hangs, none ends twice (an abort pause once left streams with no terminal:
    vllm-project/tpu-inference #3362).
    Where the deployment names the weights, they are the old or the new version, nothing
    else."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    modes = family.pause_modes
    if mode_index >= len(modes):
        pytest.skip(f"{family.name} has {len(modes)} pause modes")
    mode = modes[mode_index]
    old_version = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
    # a `wait` pause lasts until the streams end: short ones still cross the pause
    workers = pins(chosen)
    on = [workers[index % len(workers)] for index in range(max(STREAMS, len(workers)))]
    streams = [
        in_flight(rl_client, rl_target, worker, WAIT_TOKENS if mode == "wait" else None)
        for worker in on
    ]
    # SGLang documents a flush after an `in_place` pause as unsuccessful: an update refusing
    # for that reason is flagged, and the streams are judged all the same
    holding_sglang = family.name == "sglang" and mode in IN_PLACE_MODES
    sent, answered, version = across_update(
        rl_verdict,
        rl_admin,
        rl_weights,
        chosen,
        mode,
        streams,
        lambda stream: stream.start_and_wait_first_token(rl_verdict),
        refusal_flagged if holding_sglang else None,
    )
    crossed = [
        (worker, stream)
        for worker, stream, before, at_pause in zip(on, streams, sent, answered, strict=True)
        if not before.ended
        and not (at_pause.ended and at_pause.tokens >= stream.max_tokens and mode != "wait")
    ]
    for worker, stream in crossed:
        exchange = stream.exchange
        # Cut short by an abort, it says so: a trainer must tell a truncated sample from a
        # finished one.
        nvext = ended_once(rl_verdict, stream, worker).nvext  # each key's last value
        reported = nvext.get("engine_data", {}).get("weight_version")
        rl_verdict.check(
            on_worker(control.version_is_one_of(reported, [old_version, version]), worker),
            exchange,
        )
    uncrossed = [worker for worker in workers if all(w != worker for w, _ in crossed)]
    if uncrossed:
        ends = [a.describe() for w, a in zip(on, answered, strict=True) if w in uncrossed]
        raise Unobservable(
            f"on {', '.join(label(worker) for worker in uncrossed)}: every stream had run to "
            f"its end ({', '.join(ends)} of {streams[0].max_tokens}) when the {mode!r} pause "
            "was answered: none crossed the refresh"
        )
    require_observed(chosen, f"streams in flight across a refresh in {mode!r}", rl_verdict)


@capability(contract.refresh.INFLIGHT_TERMINAL)
def test_a_stream_in_flight_across_an_update_reports_finite_logprobs(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """A completion stream asking for logprobs, on each selected worker, is held by a pause that
    keeps it (vLLM `keep`, SGLang `retract`) while its worker loads new weights, and resumed: the
    logprob of every token it returns, before and after the update, is a finite number <= 0
    (an update that overlaps generation once turned them NaN: NVIDIA-NeMo/RL #2180), and it
    ends once, as every stream in flight across a refresh (this row). Held by the pause, not by
    the engine's pace; a stream that had ended when the pause answered crossed nothing."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    mode = "keep" if "keep" in family.pause_modes else family.refresh_mode
    if mode in ("abort", "wait"):
        pytest.skip(f"the {family.name} family has no pause that keeps requests across an update")
    rl_weights.require(family)
    workers = pins(chosen)
    budget = in_flight_budget(rl_client, rl_target, len(PROMPT))
    streams = [
        InFlightStream(
            rl_client,
            rl_target,
            PROMPT,
            instance_id=None if worker is None else worker.instance_id,
            max_tokens=budget,
            options={"logprobs": 1},
        )
        for worker in workers
    ]
    _, answered, _ = across_update(
        rl_verdict,
        rl_admin,
        rl_weights,
        chosen,
        mode,
        streams,
        lambda stream: stream.start_and_wait_first_token(rl_verdict),
    )
    for worker, stream, at_pause in zip(workers, streams, answered, strict=True):
        if at_pause.ended:
            raise Unobservable(
                f"the stream had ended ({at_pause.describe()}) when the {mode!r} pause answered: "
                "none crossed the update"
            )
        exchange = stream.exchange
        fold = ended_once(rl_verdict, stream, worker)
        rl_verdict.check(on_worker(logprobs.finite_nonpositive(fold), worker), exchange)
    require_observed(chosen, "a stream in flight across an update", rl_verdict)
