"""What the refresh suites send and read: their fixed prompt, the number of consecutive refits
their checks go through, a generation pinned to one worker (its ids and the version it names),
and a stream pinned to one worker that stays in flight across a control step."""

from __future__ import annotations

from typing import Any

from ..client.http import Client
from ..model.target import Target
from ..model.verdict import FeatureAbsent, Verdict
from .admin import AdminWorker
from .inflight import InFlightStream, in_flight_budget
from .refresh import completion_ids, pinned_generation, reported_version

PROMPT = [
    640,
    1024,
    777,
    1800,
    512,
    333,
    901,
    445,
    1203,
    377,
    1500,
    1234,
    999,
    888,
    777,
    666,
    555,
    444,
    333,
    1999,
]
REFITS = 3
"""Consecutive refits the version, served-policy and cache checks go through: what works on
the first refit only is a bug trainers hit on their second step."""


def generate_ids(
    rl_verdict: Verdict, rl_client: Client, rl_target: Target, worker: AdminWorker | None
) -> tuple[list[int], Any]:
    """The completion ids of `PROMPT` pinned to `worker`, and the weight version it names."""
    exchange = pinned_generation(rl_client, rl_target, worker, PROMPT)
    rl_verdict.json(exchange)
    ids = completion_ids(exchange)
    if ids is None:
        raise FeatureAbsent("completion_token_ids unavailable on the pinned route")
    return ids, reported_version(exchange)


def in_flight(
    rl_client: Client,
    rl_target: Target,
    worker: AdminWorker | None,
    max_tokens: int | None = None,
) -> InFlightStream:
    """A stream pinned to `worker` (unpinned for None: `each_worker.pins`), long enough to be in
    flight across a control step (`in_flight_budget`), unless `max_tokens` says otherwise."""
    budget = in_flight_budget(rl_client, rl_target, len(PROMPT))
    return InFlightStream(
        rl_client,
        rl_target,
        PROMPT,
        instance_id=None if worker is None else worker.instance_id,
        max_tokens=budget if max_tokens is None else min(max_tokens, budget),
    )
