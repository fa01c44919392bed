"""Request migration: a stream whose worker's process is killed under it, on a frontend started
with `--migration-limit` above 0, continues on another worker with no id lost or repeated
(`checks.migration`).

Needs a deployment whose workers can be killed on demand and whose frontend's migration limit is
known: a channel only deployments the suite launched offer (declared with `needs`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rl_conformance import MissingInput, Unobservable, contract
from rl_conformance.checks import migration
from rl_conformance.checks.base import get_path
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import await_rejoin, routed_now
from rl_conformance.control.inflight import InFlightStream, in_flight_budget
from rl_conformance.model.target import WORKER_KILL, Target, WorkerKillProbe
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = [pytest.mark.mutating, pytest.mark.needs(WORKER_KILL)]
PROMPT = [640, 1024, 777, 1800, 512, 333, 901, 445]
OPTIONS = {"logprobs": 1, "stream_options": {"include_usage": True}}
MIGRATION_TOKENS = 256
"""A stream killed right after its first token is still in flight for hundreds of tokens (a
second or more on a CPU engine), and three of them (two unbroken, one killed) stay short."""


@capability(contract.migration.CONTINUITY)
def test_a_stream_whose_worker_dies_continues_elsewhere_with_no_id_lost_or_repeated(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_probe: WorkerKillProbe,
) -> None:
    """A long greedy stream (EOS ignored), unpinned; once it delivered its first token, the
    process of the worker its first chunk names (`nvext.worker_id`) is killed. The stream must
    end in terminal success and read as the same stream run unbroken does: its ids (where two
    unbroken runs agree), its selected logprobs and its usage's completion count. The killed
    worker is started again afterwards."""
    limit = rl_target.migration_limit
    if limit is None:
        raise Unobservable("the frontend's --migration-limit is not known for this deployment")
    if limit == 0:
        raise MissingInput(
            "the frontend runs with --migration-limit 0 (Dynamo's default) and moves no "
            "request: give --migration-limit N (N > 0) to judge migration"
        )
    workers = [worker for worker in rl_admin_workers if worker.system_url]
    if len(workers) < 2:
        raise Unobservable(
            f"{len(workers)} worker(s) known by system URL: a migration needs another worker "
            "to continue on"
        )
    budget = min(MIGRATION_TOKENS, in_flight_budget(rl_client, rl_target, len(PROMPT)))
    unbroken, deterministic = unbroken_stream(rl_verdict, rl_client, rl_target, budget)
    stream = long_stream(rl_client, rl_target, budget)
    routed = routed_now(rl_admin, rl_target)
    sent = stream.start_and_wait_first_token(rl_verdict)
    victim = serving_worker(stream.progress.first_event, workers)
    if victim is None:
        stream.wait()
        raise Unobservable(
            "the stream's first chunk names no worker among those known by system URL "
            f"(nvext.worker_id: {named_worker(stream.progress.first_event)!r})"
        )
    if not rl_admin.policy.permits(victim.instance_id):
        stream.wait()
        raise rl_admin.policy.refusal(f"killing {victim.label}")
    assert victim.system_url is not None
    before_kill = stream.mark()
    if before_kill.ended:  # how a stream that ended by itself ended is the stream rows' to judge
        stream.wait()
        raise Unobservable(
            f"the stream had ended ({before_kill.describe()}) before its worker could be killed"
        )
    try:
        rl_probe.kill_worker(victim.system_url)
        killed_at = stream.mark()
        stream.wait()
    finally:
        rl_probe.revive_worker(victim.system_url)
        await_rejoin(rl_admin, rl_target, routed)
    if killed_at.ended and killed_at.tokens >= budget:
        raise Unobservable(f"the stream had ended ({sent.describe()}) when its worker was killed")
    spliced, seen = folded(rl_verdict, stream, budget, killed_at.tokens)
    rl_verdict.measure(
        migration={
            "migration_limit": limit,
            "killed": victim.label,
            "ids_read_before_kill": killed_at.tokens,
            "prompt_tokens": {"sent": len(PROMPT), "usage": seen["prompt_tokens"]},
            "engine_data_ids": seen["engine_data_ids"],
            "deterministic": deterministic,
        }
    )
    rl_verdict.check(migration.continuity(spliced, unbroken, limit, deterministic), stream.exchange)


def long_stream(rl_client: Client, rl_target: Target, max_tokens: int) -> InFlightStream:
    """The greedy stream the test kills under, unpinned, naming its worker."""
    return InFlightStream(
        rl_client,
        rl_target,
        PROMPT,
        instance_id=None,
        max_tokens=max_tokens,
        fields=("worker_id",),
        options=OPTIONS,
    )


def folded(
    rl_verdict: Verdict, stream: InFlightStream, max_tokens: int, read_before_kill: int
) -> tuple[migration.Spliced, dict[str, Any]]:
    exchange = stream.exchange
    state = exchange.state.value if exchange.state else "none"
    error = None if state == "success" else (exchange.state_reason or exchange.error)
    return migration.spliced(
        rl_verdict.events(exchange), state, error, max_tokens, read_before_kill
    )


def unbroken_stream(
    rl_verdict: Verdict, rl_client: Client, rl_target: Target, max_tokens: int
) -> tuple[migration.Spliced, bool]:
    """The same stream run twice without a kill: the reference, and whether both runs gave the
    same ids (the deployment is deterministic here). A deployment whose unbroken stream does
    not end well is the stream rows' to judge: inconclusive here."""
    runs = []
    for _ in range(2):
        stream = long_stream(rl_client, rl_target, max_tokens)
        stream.thread.start()
        stream.wait()
        runs.append(folded(rl_verdict, stream, max_tokens, 0)[0])
    first, second = runs
    problem = migration.reference_problem(first) or migration.reference_problem(second)
    if problem is not None:
        raise Unobservable(
            f"the same stream unbroken {problem}: the stream rows judge that, and migration "
            "is judged against an unbroken stream that ends well"
        )
    return first, first.ids == second.ids


def named_worker(first_event: str | None) -> Any:
    """The worker id the first chunk names: `nvext.worker_id`, an integer or Dynamo's
    `{"prefill_worker_id", "decode_worker_id"}` (the decode worker generates)."""
    try:
        payload = json.loads(first_event or "")
    except ValueError:
        return None
    named = get_path(payload, "nvext", "worker_id")
    if isinstance(named, dict):
        return named.get("decode_worker_id", named.get("prefill_worker_id"))
    return named


def serving_worker(first_event: str | None, workers: list[AdminWorker]) -> AdminWorker | None:
    named = named_worker(first_event)
    return next((w for w in workers if named is not None and w.instance_id == named), None)
