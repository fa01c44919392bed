"""A worker whose engine dies under a stream and is restarted by its sidecar: the stream ends in an
error or completes elsewhere, never clean and short; the restarted worker does not report the
version applied before the crash (its engine starts on its starting weights), by its version
route or in the generations it serves after.

Needs a deployment whose engine can be killed on demand: a channel only deployments the suite
launched offer (declared with `needs`)."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance import FeatureAbsent, Unobservable, contract
from rl_conformance.checks import aggregate_stream, recovery, terminal
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import apply_update, instance_of, select, succeed
from rl_conformance.control.inflight import InFlightStream, in_flight_budget
from rl_conformance.control.refresh import pinned_generation
from rl_conformance.control.requests import chat
from rl_conformance.control.weights import WeightSource
from rl_conformance.model.target import ENGINE_RECOVERY, EngineRecoveryProbe, Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
pytestmark = [pytest.mark.mutating, pytest.mark.needs(ENGINE_RECOVERY)]
PROMPT = [640, 1024, 777, 1800, 512, 333, 901, 445]


def served_engine_data(served: Exchange) -> dict[str, Any] | None:
    """The `nvext.engine_data` of a generation answered 200 with a JSON body, else None."""
    if served.status != 200:
        return None
    try:
        found = served.json()["nvext"]["engine_data"]
    except (ValueError, KeyError, TypeError):
        return None
    return found if isinstance(found, dict) else None


@capability(contract.refresh.RECOVERED_WORKER)
def test_a_restarted_engine_fails_its_streams_and_reports_no_pre_crash_version(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
    rl_probe: EngineRecoveryProbe,
) -> None:
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    if family.version is None:
        raise FeatureAbsent(f"the {family.name} family has no route to read its weight version")
    instance_id = instance_of(chosen)
    if instance_id is None:
        raise Unobservable("the worker's instance id, which names the engine to kill")
    applied = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
    budget = in_flight_budget(rl_client, rl_target, len(PROMPT))
    stream = InFlightStream(
        rl_client, rl_target, PROMPT, instance_id=instance_id, max_tokens=budget
    )
    sent = stream.start_and_wait_first_token(rl_verdict)
    try:
        rl_probe.crash_engine(instance_id)
    finally:
        stream.wait()
    worker = chosen.workers[0]
    reply = succeed(rl_verdict, rl_admin, worker, family, family.version, {})
    rl_verdict.check(recovery.recovered_version(applied, family.read_version(reply), worker.label))
    # a generation after the restart without nvext.engine_data (no 200 JSON body carrying it)
    # shows no sample version: measured unread, not judged
    unread: list[str] = []
    for route, served in (
        (
            "completions",
            pinned_generation(rl_client, rl_target, chosen.pinned, PROMPT, max_tokens=2),
        ),
        (
            "chat",
            chat(
                rl_client,
                rl_target,
                token_data=PROMPT,
                max_tokens=2,
                temperature=0,
                extra_fields=("completion_token_ids", "engine_data"),
                nvext={"backend_instance_id": instance_id},
                headers={"x-dynamo-worker-instance-id": str(instance_id)},
            ),
        ),
    ):
        engine_data = served_engine_data(served)
        if engine_data is None:  # its status and body are the rows of the generation's own
            unread.append(f"{route}: HTTP {served.status}, no nvext.engine_data")
            continue
        named = engine_data.get("weight_version")
        rl_verdict.check(recovery.recovered_sample_version(applied, named, worker.label), served)
    rl_verdict.measure(sample_versions_unread=unread)
    if sent.ended:
        raise Unobservable(f"the stream had ended ({sent.describe()}) when the engine was killed")
    exchange = stream.exchange
    ending = terminal.ending_from_body(aggregate_stream(rl_verdict.events(exchange)))
    state = exchange.state.value if exchange.state else "none"
    rl_verdict.check(recovery.crashed_stream_not_clean(state, ending, stream.max_tokens), exchange)
