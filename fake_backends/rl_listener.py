"""The frontend's RL discovery listener: ``GET /v1/rl/workers`` on its own port.

Shapes follow the facts sheet §1 exactly: protocol version 1; workers sorted by
(namespace, component, endpoint, instance_id); optional fields absent (never null);
``routes`` sorted and unique.  The listener serves nothing else: other methods on the
path are 405 with an empty body, every other path is 404 with an empty body (axum's
defaults, no fallback installed).
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fake_backends.state import DeploymentState
from fake_backends.wire import json_response
from fake_backends.worker_admin import VLLM_RL_ROUTES
from fake_backends.workers import COMPONENT, NAMESPACE, RL_ENDPOINT, EngineWorker, instance_id_for

PROTOCOL_VERSION = 1
WORKERS_PATH = "/v1/rl/workers"
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
RL_URL = f"dyn://{NAMESPACE}.{COMPONENT}.{RL_ENDPOINT}"
PROBE_ERROR = "worker routes request failed"


def _describe(worker: EngineWorker, instance_id: int) -> dict[str, Any]:
    address = f"{worker.transport_address}/{instance_id:016x}/{NAMESPACE}/{COMPONENT}/{RL_ENDPOINT}"
    entry: dict[str, Any] = {
        "namespace": NAMESPACE,
        "component": COMPONENT,
        "endpoint": RL_ENDPOINT,
        "instance_id": instance_id,
        "transport": {"tcp": address},
        "request_plane_url": RL_URL,
    }
    if worker.system_url:
        entry["system_url"] = worker.system_url
    entry["model"] = worker.model_name
    entry["routes"] = sorted(set(VLLM_RL_ROUTES))
    entry["world_size"] = 1
    return entry


def _apply_faults(state: DeploymentState, entries: list[dict[str, Any]]) -> None:
    """Break the listing in the named ways; entries[i] is configured worker i."""
    first = entries[0] if entries else None
    if state.fault("duplicate_instance_ids") and len(entries) > 1:
        entries[1]["instance_id"] = entries[0]["instance_id"]
    for entry in entries:
        if state.fault("routes_unsorted"):
            entry["routes"] = sorted(entry["routes"], reverse=True)
        if state.fault("routes_duplicated") and entry["routes"]:
            entry["routes"] = sorted(
                [*entry["routes"], entry["routes"][0]], reverse=state.fault("routes_unsorted")
            )
    if first is None:
        return
    if state.fault("request_plane_url_mismatch"):
        first["request_plane_url"] = f"dyn://{NAMESPACE}.{COMPONENT}.generate"
    if state.fault("probe_error_with_routes"):
        first["error"] = PROBE_ERROR
    if state.fault("optional_field_null"):
        first["system_url"] = None
    if state.fault("worker_without_routes"):
        del first["routes"]


def list_workers(state: DeploymentState) -> dict[str, Any]:
    """The response body of one read of ``/v1/rl/workers``."""
    read = next(state.rl_reads)
    workers = state.workers if state.personality.rl_workers else []
    unstable = state.fault("worker_identity_unstable")
    entries = [
        _describe(w, instance_id_for(w.index, read + 1) if unstable else w.instance_id)
        for w in workers
    ]
    _apply_faults(state, entries)
    entries.sort(key=lambda e: (e["namespace"], e["component"], e["endpoint"], e["instance_id"]))
    if state.fault("instance_id_rounded"):
        for entry in entries:
            entry["instance_id"] = float(entry["instance_id"])
    version = 2 if state.fault("protocol_version_2") else PROTOCOL_VERSION
    return {"protocol_version": version, "namespace": NAMESPACE, "workers": entries}


def build_rl_app(state: DeploymentState) -> Starlette:
    async def dispatch(request: Request) -> Response:
        if request.url.path != WORKERS_PATH:
            return Response(status_code=404)
        if request.method == "HEAD":
            return Response(status_code=200, media_type="application/json")
        if request.method != "GET":
            return Response(status_code=405, headers={"allow": "GET,HEAD"})
        return json_response(list_workers(state))

    return Starlette(routes=[Route("/{path:path}", dispatch, methods=ALL_METHODS)])
