"""The RL listener's route probes: replies it must refuse, a worker's own error, a worker that never
answers. The listener lists such a worker with `routes: []` and an `error`, and every other worker
as before.

Needs a deployment whose worker can be made to answer its probe with a chosen reply, or not at
all, and whose listener can be restarted with a short `DYN_RL_REQUEST_TIMEOUT_SECS`: channels only
deployments the suite launched offer (declared with `needs`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from rl_conformance import MissingInput, contract
from rl_conformance.checks import probes
from rl_conformance.client.http import Client, discovery_deadline_s
from rl_conformance.errors import LaunchError
from rl_conformance.model.target import LISTENER_RESTART, PROBE_REPLY, ProbeReplyProbe, Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

from .test_discovery import read_workers, require_workers

capability = pytest.mark.capability
pytestmark = [pytest.mark.mutating, pytest.mark.needs(PROBE_REPLY, LISTENER_RESTART)]

REFUSED: dict[str, Any] = {
    "no routes array": {"status": "ok", "system_url": "http://127.0.0.1:9"},
    "a non-string route": {"routes": ["pause_generation", 7]},
    "an empty route": {"routes": ["pause_generation", ""]},
    "world_size 0": {"routes": ["pause_generation"], "world_size": 0},
    "a fractional world_size": {"routes": ["pause_generation"], "world_size": 1.5},
    "a string world_size": {"routes": ["pause_generation"], "world_size": "1"},
    "admin_base_url without world_size": {
        "routes": ["pause_generation"],
        "admin_base_url": "http://127.0.0.1:9",
    },
    "a JSON string": "routes",
}
"""Replies the listener refuses, by what is wrong with them."""
WORKER_ERROR = "engine is dead"
UNSORTED_ROUTES = ["resume_generation", "pause_generation", "resume_generation"]
LISTENER_DEADLINE_S = 1
"""The listener's probe deadline while one worker never answers (`DYN_RL_REQUEST_TIMEOUT_SECS`)."""


@dataclass(frozen=True)
class Probing:
    """What a probe test acts through, and the read with every worker answering its own probe."""

    client: Client
    target: Target
    verdict: Verdict
    probe: ProbeReplyProbe
    steady: Any

    def read(self) -> tuple[Any, Exchange]:
        return read_workers(self.client, self.target, self.verdict)


@pytest.fixture
def probing(
    rl_probe: ProbeReplyProbe, rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> Iterator[Probing]:
    """The last worker's own reply and the listener's own environment are back when the test
    ends."""
    if not rl_target.rl_url:
        raise MissingInput("no RL listener URL for this target (give --rl-url)")
    body, _ = read_workers(rl_client, rl_target, rl_verdict)
    require_workers(body)
    try:
        yield Probing(rl_client, rl_target, rl_verdict, rl_probe, body)
    finally:
        with contextlib.suppress(LaunchError):  # a deployment already stopped needs no restore
            rl_probe.restore_probe_reply()
            rl_probe.rescope_listener({})


@capability(contract.discovery.PROBE_REPLIES_VALIDATED)
def test_a_refused_probe_reply_fails_closed_and_spares_the_others(probing: Probing) -> None:
    verdict = probing.verdict
    for why, reply in REFUSED.items():
        instance_id = probing.probe.replace_probe_reply(reply)
        body, exchange = probing.read()
        answered = f"answered {why}"
        verdict.check(probes.probe_refusal_listed(body, instance_id, answered), exchange)
        verdict.check(probes.others_unchanged(probing.steady, body, instance_id), exchange)
    instance_id = probing.probe.replace_probe_reply({"status": "error", "message": WORKER_ERROR})
    body, exchange = probing.read()
    answered = f"answered its own error {WORKER_ERROR!r}"
    verdict.check(probes.probe_refusal_listed(body, instance_id, answered, WORKER_ERROR), exchange)
    verdict.check(probes.others_unchanged(probing.steady, body, instance_id), exchange)
    instance_id = probing.probe.replace_probe_reply({"routes": UNSORTED_ROUTES, "world_size": 2})
    body, exchange = probing.read()
    verdict.check(probes.probe_reply_listed(body, instance_id, UNSORTED_ROUTES, 2), exchange)


@capability(contract.discovery.PROBE_DEADLINE)
def test_a_worker_that_never_answers_is_listed_with_its_error_in_time(probing: Probing) -> None:
    """The listener's deadline is set short; the read waits the suite's discovery deadline
    (longer than any listener's default), so only a listener that outlives its own deadline
    fails it."""
    client, verdict = probing.client, probing.verdict
    probing.probe.rescope_listener({"DYN_RL_REQUEST_TIMEOUT_SECS": str(LISTENER_DEADLINE_S)})
    instance_id = probing.probe.hang_probe_reply()
    read_deadline_s = discovery_deadline_s(client.deadline_s)
    exchange = client.get(probing.target.rl("/v1/rl/workers"), deadline_s=read_deadline_s)
    verdict.check(
        probes.probe_deadline_kept(
            exchange.status, exchange.error, LISTENER_DEADLINE_S, read_deadline_s
        ),
        exchange,
    )
    body = verdict.json(exchange)
    hung = f"was never answered (listener deadline {LISTENER_DEADLINE_S} s)"
    verdict.check(probes.probe_refusal_listed(body, instance_id, hung), exchange)
    verdict.check(probes.others_unchanged(probing.steady, body, instance_id), exchange)
