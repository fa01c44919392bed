"""Checks of how the RL listener lists a worker from its route probe: a reply it must refuse, a
worker's own error, a probe past the listener's deadline (`DYN_RL_REQUEST_TIMEOUT_SECS`), and the
workers around it, which stay as they were.

Dynamo's listener reads a worker's reply to `{"method": "routes"}` and lists the worker with
`routes: []` and an `error` when the reply has no `routes` array, a non-string or empty route, an
invalid `world_size` or `admin_base_url`, or `admin_base_url` without a valid `world_size`, when
the worker answers `{"status": "error", "message": M}` (then the error is M), and when the probe
outlives the deadline (ai-dynamo/dynamo `lib/rl/src/lib.rs`, `parse_worker_routes` and
`describe_worker`). The wording of the listener's own errors is no part of the contract: only
that there is one.
"""

from __future__ import annotations

from typing import Any

from .base import MISSING, Findings, Violation, check, describe
from .discovery import SECTION, identity, workers_of

FAIL_CLOSED = "`error`: Probe failure; fail closed when a required worker or route is unavailable"
DEADLINE = (
    "`DYN_RL_REQUEST_TIMEOUT_SECS` (default `30`): Bounds each worker descriptor probe. "
    "Discovery can also return a worker with an `error` and an empty route list when its "
    "descriptor probe times out or fails."
)
WITHHELD = ("system_url", "admin_base_url", "world_size")


def _entries(body: Any, instance_id: int) -> list[tuple[int, dict[str, Any]]]:
    return [
        (position, worker)
        for position, worker in enumerate(workers_of(body))
        if worker.get("instance_id") == instance_id and not isinstance(worker["instance_id"], bool)
    ]


def _one_entry(body: Any, instance_id: int, why: str) -> tuple[int, dict[str, Any]] | Violation:
    found = _entries(body, instance_id)
    if len(found) == 1:
        return found[0]
    return Violation(
        f"the worker whose probe {why} is listed {len(found)} times, once expected",
        "workers[*].instance_id",
        instance_id,
        [worker.get("instance_id") for worker in workers_of(body)],
    )


@check(
    "discovery.probe_refusal_listed",
    title="a worker whose probe failed is listed with routes [] and its error",
    spec=FAIL_CLOSED,
    section=SECTION,
)
def probe_refusal_listed(
    body: Any, instance_id: int, why: str, error: str | None = None
) -> Findings:
    """`why`: what the worker answered (for the messages); `error`: the worker's own message,
    which must be the listed `error` verbatim (None: any non-empty error)."""
    found = _one_entry(body, instance_id, why)
    if isinstance(found, Violation):
        yield found
        return
    position, worker = found
    where = f"workers[{position}]"
    listed = worker.get("error", MISSING)
    if not isinstance(listed, str) or not listed:
        yield Violation(
            f"{where} (its probe {why}) is listed without an error",
            f"{where}.error",
            error or "a non-empty message",
            describe(listed),
        )
    elif error is not None and listed != error:
        yield Violation(
            f"{where} (its probe {why}) is listed with another error than the worker's own",
            f"{where}.error",
            error,
            listed,
        )
    if worker.get("routes", MISSING) != []:
        yield Violation(
            f"{where} (its probe {why}) lists routes",
            f"{where}.routes",
            [],
            describe(worker.get("routes", MISSING)),
        )
    for name in WITHHELD:
        if name in worker:
            yield Violation(
                f"{where} (its probe {why}) advertises {name}",
                f"{where}.{name}",
                "(absent)",
                worker[name],
            )


@check(
    "discovery.probe_reply_listed",
    title="a worker's valid probe reply is listed: its routes sorted and unique, no error",
    spec="`routes`: Worker-advertised Dynamo administration routes",
    section=SECTION,
)
def probe_reply_listed(body: Any, instance_id: int, routes: list[str], world_size: int) -> Findings:
    found = _one_entry(body, instance_id, f"answered routes {routes}")
    if isinstance(found, Violation):
        yield found
        return
    position, worker = found
    where = f"workers[{position}]"
    if "error" in worker:
        yield Violation(
            f"{where} answered a valid probe reply yet is listed with an error",
            f"{where}.error",
            "(absent)",
            worker["error"],
        )
    for name, expected in (("routes", sorted(set(routes))), ("world_size", world_size)):
        if worker.get(name, MISSING) != expected:
            yield Violation(
                f"{where}: the {name} it answered expected (routes sorted, without duplicates)",
                f"{where}.{name}",
                expected,
                describe(worker.get(name, MISSING)),
            )


@check(
    "discovery.others_unchanged",
    title="one worker's failed probe leaves every other worker listed as before",
    spec=FAIL_CLOSED,
    section=SECTION,
)
def others_unchanged(before: Any, after: Any, instance_id: int) -> Findings:
    """`before`: a read with every worker answering its own probe."""
    now = {identity(worker): worker for worker in workers_of(after)}
    for worker in workers_of(before):
        if worker.get("instance_id") == instance_id:
            continue
        key = identity(worker)
        if now.get(key) != worker:
            yield Violation(
                f"worker {key[3]} answered its own probe yet is listed otherwise once another "
                "worker's probe failed",
                f"workers[instance_id={key[3]}]",
                worker,
                describe(now.get(key, MISSING)),
            )


@check(
    "discovery.probe_deadline_kept",
    title="a worker that never answers its probe is listed with its error within the "
    "listener's deadline",
    spec=f"{FAIL_CLOSED}. {DEADLINE} (Upstream RL Implementation Guide, discovery listener "
    "variables.)",
    section=SECTION,
)
def probe_deadline_kept(
    status: int | None, error: str | None, listener_deadline_s: float, read_deadline_s: float
) -> Findings:
    """The read of `/v1/rl/workers` while one worker never answers: it must be answered (200)
    before `read_deadline_s`, a bound well past the listener's own `listener_deadline_s`."""
    if status == 200:
        return
    yield Violation(
        f"GET /v1/rl/workers was not answered within {read_deadline_s:g} s while one worker "
        f"never answered its probe; the listener's probe deadline is {listener_deadline_s:g} s",
        "GET /v1/rl/workers",
        f"200 within {listener_deadline_s:g} s plus the listener's own work",
        error or status,
    )
