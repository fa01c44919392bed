"""The RL listener's route probe of one worker, and how the listener reads the reply.

The listener asks each worker ``{"method": "routes"}`` on its ``rl`` request-plane endpoint; the
worker answers ``{"status": "ok", "routes": [...sorted], "system_url": ..., "world_size": ...}``
(``dynamo/common/rl/admin.py`` ``describe``).  The listener validates that reply and bounds each
probe by ``DYN_RL_REQUEST_TIMEOUT_SECS`` (default 30 s); a reply it refuses, a worker's own
``{"status": "error", "message": M}`` and a probe past its deadline all list the worker with
``routes: []`` and an ``error`` (ai-dynamo/dynamo ``lib/rl/src/lib.rs`` ``parse_worker_routes``,
``describe_worker``; the same messages are in the ``_core.abi3.so`` of 1.6.1 and of
1.7.0.dev20261026).

A worker's reply is its own unless the control port replaced it (``POST /probe_reply``): a chosen
JSON value, or ``hang`` (no reply at all), on the last worker.  Faults:
``probe_reply_unvalidated`` lists a replaced reply's fields as they came;
``probe_worker_error_replaced`` words a worker's own error with the listener's generic text;
``probe_deadline_ignored`` waits for a hung worker past the deadline;
``probe_timeout_fails_all`` lists every worker with the timeout error when one probe times out.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fake_backends.runtime.state import DeploymentState
from fake_backends.runtime.workers import EngineWorker

TIMEOUT_VARIABLE = "DYN_RL_REQUEST_TIMEOUT_SECS"
DEFAULT_TIMEOUT_S = 30
GENERIC_ERROR = "worker routes request failed"
TIMED_OUT = "worker discovery timed out after "
IGNORED_DEADLINE_WAIT_S = 600.0
"""How long a listener that ignores its deadline waits for a hung worker (the control port ends
the hang sooner by replacing the reply)."""


HANG = object()
"""The reply of a worker that never answers its probe."""


class ProbeRefused(Exception):
    """The listener lists the worker with this message as its ``error``."""


@dataclass
class ProbedRoutes:
    routes: list[str] = field(default_factory=list)
    system_url: str | None = None
    admin_base_url: str | None = None
    world_size: Any = None


def probe_timeout_s(state: DeploymentState) -> int:
    """``DYN_RL_REQUEST_TIMEOUT_SECS`` as the listener reads it: an unsigned integer, else 30."""
    raw = state.listener_env().get(TIMEOUT_VARIABLE, "")
    return int(raw) if raw.isdigit() else DEFAULT_TIMEOUT_S


def worker_reply(worker: EngineWorker, world_size: int = 1) -> dict[str, Any]:
    reply: dict[str, Any] = {"status": "ok", "routes": sorted(worker.advertised_routes)}
    if worker.system_url:
        reply["system_url"] = worker.system_url
    reply["world_size"] = world_size
    return reply


def _world_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**32:
        raise ProbeRefused("worker routes response has invalid 'world_size'")
    return value


def read_reply(value: Any, state: DeploymentState) -> ProbedRoutes:
    """The listener's reading of a probe reply; ProbeRefused with the listener's message."""
    if not isinstance(value, dict):
        raise ProbeRefused("worker routes response missing 'routes' array")
    if value.get("status") == "error":
        message = value.get("message")
        if state.faults.active("probe_worker_error_replaced") or not isinstance(message, str):
            message = GENERIC_ERROR
        raise ProbeRefused(message)
    if state.faults.active("probe_reply_unvalidated"):
        return _unvalidated(value)
    routes = value.get("routes")
    if not isinstance(routes, list):
        raise ProbeRefused("worker routes response missing 'routes' array")
    for route in routes:
        if not isinstance(route, str):
            raise ProbeRefused("worker routes response contains a non-string route entry")
        if not route:
            raise ProbeRefused("worker routes response contains an empty route entry")
    system_url = value.get("system_url")
    system_url = system_url.strip() if isinstance(system_url, str) else None
    admin = _admin_base_url(value["admin_base_url"]) if "admin_base_url" in value else None
    world_size = _world_size(value["world_size"]) if "world_size" in value else None
    if admin is not None and world_size is None:
        raise ProbeRefused("worker routes response has 'admin_base_url' without valid 'world_size'")
    return ProbedRoutes(sorted(set(routes)), system_url or None, admin, world_size)


def _admin_base_url(value: Any) -> str:
    """An HTTP(S) URL with a host and no user information, query or fragment (the listener's
    `RlAdminBaseUrl::parse`)."""
    text = value.strip() if isinstance(value, str) else ""
    parts = urlsplit(text)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.query
        or parts.fragment
    ):
        raise ProbeRefused("worker routes response has invalid 'admin_base_url'")
    return text


def _unvalidated(value: dict[str, Any]) -> ProbedRoutes:
    routes = value.get("routes")
    kept = [r for r in routes if isinstance(r, str)] if isinstance(routes, list) else []
    return ProbedRoutes(
        sorted(set(kept)),
        value.get("system_url"),
        value.get("admin_base_url"),
        value.get("world_size"),
    )


async def probe(state: DeploymentState, worker: EngineWorker) -> ProbedRoutes | str:
    """The worker's routes, or the ``error`` the listener lists it with."""
    timeout_s = probe_timeout_s(state)
    if worker.index not in state.probe_replies:
        return read_reply(worker_reply(worker), state)
    wait_s = IGNORED_DEADLINE_WAIT_S if state.faults.active("probe_deadline_ignored") else timeout_s
    try:
        reply = await asyncio.wait_for(_reply_of(state, worker), wait_s)
    except TimeoutError:
        return f"{TIMED_OUT}{timeout_s}s"
    try:
        return read_reply(reply, state)
    except ProbeRefused as refused:
        return str(refused)


async def _reply_of(state: DeploymentState, worker: EngineWorker) -> Any:
    """The replaced reply; a hung worker answers only once the control port replaces it."""
    while state.probe_replies.get(worker.index, None) is HANG:
        await asyncio.sleep(0.05)
    return state.probe_replies.get(worker.index, worker_reply(worker))
