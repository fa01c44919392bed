"""The frontend's RL discovery listener: ``GET /v1/rl/workers`` on its own port.

Shapes follow the CONTRACT-NOTES §U1 exactly: protocol version 1; workers sorted by
(namespace, component, endpoint, instance_id); optional fields absent (never null);
``routes`` sorted and unique, verbatim as the worker advertises them
(``control/pause_generation`` for the native sidecar).  The listener serves nothing else:
other methods on the path are 405 with an empty body, every other path is 404 with an empty
body (axum's defaults, no fallback installed).

Each worker is probed for its routes (``probes``), all at once: a reply the listener refuses, a
worker's own error and a probe past ``DYN_RL_REQUEST_TIMEOUT_SECS`` list that worker with
``routes: []`` and an ``error``, the others as usual.

Which workers are listed depends on the listener's *own* environment, read at every
request (``namespaces``): the top-level ``namespace`` is the scope, each worker carries
its own namespace and a ``request_plane_url`` built from it.

The order of ``workers`` is no part of the contract ("Discover Workers Safely": never read list
position as worker identity), so a deployment option (``listing_order``, not a fault) makes the
listener list the same workers in another order on every read: ``rotated`` (read ``n`` starts at
the ``n mod len``-th sorted worker) or ``shuffled`` (a permutation seeded by the read's number,
never the previous read's).  Both differ between consecutive reads of two or more workers.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fake_backends.discovery.namespaces import resolve_scope
from fake_backends.discovery.probes import TIMED_OUT, ProbedRoutes, probe
from fake_backends.encoding.replies import json_response
from fake_backends.runtime.state import DeploymentState
from fake_backends.runtime.workers import (
    COMPONENT,
    GENERATE_ENDPOINT,
    RL_ENDPOINT,
    EngineWorker,
    instance_id_for,
)

PROTOCOL_VERSION = 1
WORKERS_PATH = "/v1/rl/workers"
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
PROBE_ERROR = "worker routes request failed"
RENAMED_PREFIX = "engine/"
REQUIRED_ROUTE = "update_weights_from_disk"
SIDECAR_FINISH_ROUTE = "update/finish_weight_update"
LISTING_ORDERS = ("sorted", "rotated", "shuffled")
SHARDED_WORLD_SIZE = 2
UNSERVED_PORT = 9


def _describe(worker: EngineWorker, instance_id: int, probed: ProbedRoutes | str) -> dict[str, Any]:
    """A worker's entry from its probe: its routes and the fields it provided, or (a probe the
    listener refused or that ran past its deadline) `routes: []` and the `error`."""
    entry: dict[str, Any] = {
        "namespace": worker.namespace,
        "component": COMPONENT,
        "endpoint": RL_ENDPOINT,
        "instance_id": instance_id,
        "transport": worker.transport(RL_ENDPOINT, instance_id),
        "request_plane_url": worker.endpoint_url(RL_ENDPOINT),
    }
    if isinstance(probed, str):
        return {**entry, "model": worker.model_name, "routes": [], "error": probed}
    if probed.system_url:
        entry["system_url"] = probed.system_url
    if probed.admin_base_url is not None:
        entry["admin_base_url"] = probed.admin_base_url
    entry["model"] = worker.model_name
    entry["routes"] = probed.routes
    if probed.world_size is not None:
        entry["world_size"] = probed.world_size
    return entry


def _admin_base_url(worker: EngineWorker) -> str:
    """Transfer metadata apart from the system URL, as a tensor-parallel worker publishes it
    (``fixtures/dynamo-1.6.1/vllm-sidecar/variant_tp2_world_size2__rl_workers.json``): a port
    nothing listens on, so a client that administers a worker there is seen to fail."""
    netloc = urlsplit(worker.system_url or "").netloc
    return f"http://{netloc.rsplit(':', 1)[0]}:{UNSERVED_PORT}/"


def _departed(entry: dict[str, Any], worker: EngineWorker) -> dict[str, Any]:
    """How Dynamo 1.6.1 lists a worker whose process is gone, until its registration expires:
    no routes, no system_url or world_size, and the probe's `error`
    (`fixtures/dynamo-1.6.1/toy-worker/worker_gone_rl_workers.json`)."""
    dropped = ("system_url", "admin_base_url", "world_size", "routes")
    kept = {k: v for k, v in entry.items() if k not in dropped}
    address = entry["transport"]["tcp"].split("/", 1)[0]
    return {**kept, "routes": [], "error": f"Unavailable: TCP connection to {address} failed"}


def _break_worker_zero(state: DeploymentState, worker: EngineWorker, entry: dict[str, Any]) -> None:
    if state.faults.active("request_plane_url_mismatch"):
        entry["request_plane_url"] = worker.endpoint_url(GENERATE_ENDPOINT)
    if state.faults.active("probe_error_with_routes"):
        entry["error"] = PROBE_ERROR
    if state.faults.active("system_url_absent"):
        entry.pop("system_url", None)
    if state.faults.active("optional_field_null"):
        entry["system_url"] = None
    if state.faults.active("required_route_missing"):
        entry["routes"] = [r for r in entry["routes"] if r != REQUIRED_ROUTE]
    if state.faults.active("sidecar_partial_transfer_routes"):
        entry["routes"] = [r for r in entry["routes"] if r != SIDECAR_FINISH_ROUTE]
    if state.faults.active("routes_renamed"):
        entry["routes"] = sorted(RENAMED_PREFIX + r for r in entry["routes"])
    if state.faults.active("worker_without_routes"):
        del entry["routes"]


def _break_route_lists(state: DeploymentState, entries: list[dict[str, Any]]) -> None:
    for entry in entries:
        if "routes" not in entry:
            continue
        if state.faults.active("routes_unsorted"):
            entry["routes"] = sorted(entry["routes"], reverse=True)
        if state.faults.active("routes_duplicated") and entry["routes"]:
            entry["routes"] = sorted(
                [*entry["routes"], entry["routes"][0]],
                reverse=state.faults.active("routes_unsorted"),
            )


async def list_workers(state: DeploymentState) -> dict[str, Any]:
    """The response body of one read of ``/v1/rl/workers``: every worker probed at once."""
    read = next(state.rl_reads)
    scope = resolve_scope(
        state.listener_env(), empty_prefix_global=state.faults.active("empty_prefix_global")
    )
    loose = state.faults.active("namespace_prefix_matches_ns2")
    workers = state.workers if state.personality.rl_workers else []
    unstable = state.faults.active("worker_identity_unstable")
    entries: list[dict[str, Any]] = []
    by_index: dict[int, dict[str, Any]] = {}
    listed = [w for w in workers if scope.matches(w.namespace, ignore_boundary=loose)]
    probed = await _probe_all(state, listed)
    for worker, found in zip(listed, probed, strict=True):
        instance_id = instance_id_for(worker.index, read + 1) if unstable else worker.instance_id
        entry = _describe(worker, instance_id, found)
        if state.admin_base_urls and worker.system_url and entry.get("routes"):
            entry.update(world_size=SHARDED_WORLD_SIZE, admin_base_url=_admin_base_url(worker))
        if worker.runtime.departed and not state.faults.active("departed_worker_listed"):
            entry = _departed(entry, worker)
        if worker.index == 0:
            _break_worker_zero(state, worker, entry)
        by_index[worker.index] = entry
        entries.append(entry)
    if state.faults.active("duplicate_instance_ids") and 0 in by_index and 1 in by_index:
        by_index[1]["instance_id"] = by_index[0]["instance_id"]
    _break_route_lists(state, entries)
    entries.sort(key=lambda e: (e["namespace"], e["component"], e["endpoint"], e["instance_id"]))
    entries = _listing_order(state, entries, read)
    if state.faults.active("instance_id_rounded"):
        for entry in entries:
            entry["instance_id"] = float(entry["instance_id"])
    version = 2 if state.faults.active("protocol_version_2") else PROTOCOL_VERSION
    if state.faults.active("rl_listener_gateway_body"):
        return gateway_body(state)
    return {"protocol_version": version, "namespace": scope.reported, "workers": entries}


async def _probe_all(
    state: DeploymentState, workers: list[EngineWorker]
) -> list[ProbedRoutes | str]:
    found = list(await asyncio.gather(*(probe(state, worker) for worker in workers)))
    timed_out = [f for f in found if isinstance(f, str) and f.startswith(TIMED_OUT)]
    if timed_out and state.faults.active("probe_timeout_fails_all"):
        return [timed_out[0]] * len(found)
    return found


def _listing_order(
    state: DeploymentState, entries: list[dict[str, Any]], read: int
) -> list[dict[str, Any]]:
    """The sorted entries in the deployment's listing order (see the module docstring)."""
    count = len(entries)
    if state.listing_order == "sorted" or count < 2:
        return entries
    if state.listing_order == "rotated":
        shift = read % count
        order = tuple(range(shift, count)) + tuple(range(shift))
    else:
        drawn = list(range(count))
        random.Random(read).shuffle(drawn)
        order = tuple(drawn)
        if order == state.last_listing:
            order = order[1:] + order[:1]
    state.last_listing = order
    return [entries[position] for position in order]


def gateway_body(state: DeploymentState) -> dict[str, Any]:
    """What the SGLang Model Gateway's RL control plane answers on the same path (its own
    protocol 1: registry ids and URLs, engine facts, capabilities, a total; no Dynamo identity).
    Field names after ``smg-project/smg`` ``crates/protocols/src/rl.rs``."""
    workers = [
        {
            "id": f"00000000-0000-4000-8000-{worker.index:012d}",
            "url": worker.system_url,
            "base_url": worker.system_url,
            "engine": "sglang",
            "engine_version": None,
            "model_id": worker.model_name,
            "worker_type": "regular",
            "connection_mode": "http",
            "tp_size": 1,
            "dp_size": 1,
            "pp_size": 1,
            "dp_ranks": None,
            "role": None,
            "health": "healthy",
            "weight_version": worker.version,
            "labels": {},
            "capabilities": {
                "source": "static",
                "pause_modes": ["abort", "retract", "in_place"],
                "update_from": ["disk", "tensor", "distributed"],
                "abort": True,
                "flush_cache": True,
                "sleep_wake": True,
                "reports_weight_version": True,
            },
        }
        for worker in state.workers
    ]
    return {"protocol_version": PROTOCOL_VERSION, "workers": workers, "total": len(workers)}


def build_rl_app(state: DeploymentState) -> Starlette:
    async def dispatch(request: Request) -> Response:
        if request.url.path != WORKERS_PATH:
            return Response(status_code=404)
        if request.method == "HEAD":
            return Response(status_code=200, media_type="application/json")
        if request.method != "GET":
            return Response(status_code=405, headers={"allow": "GET,HEAD"})
        return json_response(await list_workers(state))

    return Starlette(routes=[Route("/{path:path}", dispatch, methods=ALL_METHODS)])
