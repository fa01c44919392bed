"""A worker's system server: ``/health``, ``/live`` and ``/engine/<route>`` (vLLM workers).

The dispatch contract follows the facts sheet §5.1-5.3 and observed 1.6.1 §6.17: any
method; empty body means ``{}``; invalid JSON is a 400 ``{"error":"Invalid JSON"}``;
an unknown route is a 404 ``{"error":"Route not found"}``; a handler's dict is the 200
reply (handled failures are ``{"status":"error"}`` with HTTP 200); replies are JSON text
sent as ``text/plain; charset=utf-8`` (``/health`` too; an unknown path is a plain-text
404 ``Route not found``, as recorded from 1.6.1).  Every ``/engine`` request lands in the
ledger.

Routes live in a registry (``AdminRoutes``) so the control plane can add the pause,
update and flush behaviour later without touching the dispatch code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fake_backends.ledger import AdminLedger
from fake_backends.wire import dumps
from fake_backends.workers import GENERATE_ENDPOINT, RL_ENDPOINT, EngineWorker

ENGINE_PREFIX = "/engine/"
TEXT_PLAIN = "text/plain; charset=utf-8"
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]

VLLM_RL_ROUTES: tuple[str, ...] = (
    "abort_request",
    "destroy_weights_update_group",
    "flush_cache",
    "get_weight_version",
    "init_weights_update_group",
    "liveness_probe",
    "pause_generation",
    "resume_generation",
    "set_weight_version",
    "update_weights_from_disk",
    "update_weights_from_distributed",
    "update_weights_from_tensor",
)

AdminHandler = Callable[[EngineWorker, dict[str, Any]], Awaitable[dict[str, Any]]]


class AdminRoutes:
    """Name -> handler; a handler gets the worker and the request body (an object)."""

    def __init__(self) -> None:
        self._handlers: dict[str, AdminHandler] = {}

    def register(self, name: str, handler: AdminHandler) -> None:
        self._handlers[name] = handler

    def get(self, name: str) -> AdminHandler | None:
        return self._handlers.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._handlers))


async def _liveness_probe(worker: EngineWorker, body: dict[str, Any]) -> dict[str, Any]:
    return {"status": "ok", "alive": True}


async def _get_weight_version(worker: EngineWorker, body: dict[str, Any]) -> dict[str, Any]:
    return {"status": "ok", "version": worker.version, "version_declared": worker.version_declared}


async def _set_weight_version(worker: EngineWorker, body: dict[str, Any]) -> dict[str, Any]:
    # vLLM semantics: metadata only; no pause needed, no cache reset, weights unchanged.
    if "weight_version" not in body:
        return {"status": "error", "message": "Missing 'weight_version' in body"}
    worker.declare_version(body["weight_version"])
    return {"status": "ok", "version": worker.version}


async def _flush_cache(worker: EngineWorker, body: dict[str, Any]) -> dict[str, Any]:
    return {"status": "ok", "message": "Cache flushed"}


async def _abort_request(worker: EngineWorker, body: dict[str, Any]) -> dict[str, Any]:
    # Generation finishes before a response is written, so nothing is ever in flight to
    # abort; like vLLM's abort of an unknown id, this succeeds without effect.
    request_id = body.get("request_id")
    if not request_id:
        return {"status": "error", "message": "Missing 'request_id' in body"}
    return {"status": "ok", "request_id": request_id}


async def _update_weights_from_tensor(worker: EngineWorker, body: dict[str, Any]) -> dict[str, Any]:
    return {"status": "error", "message": "update_weights_from_tensor is not implemented"}


def _not_yet(name: str) -> AdminHandler:
    async def handler(worker: EngineWorker, body: dict[str, Any]) -> dict[str, Any]:
        return {"status": "error", "message": f"{name} is not implemented by fake_backends yet"}

    return handler


def default_vllm_routes() -> AdminRoutes:
    """The vLLM Python worker's advertised routes; unbuilt ones answer a handled error."""
    routes = AdminRoutes()
    for name in VLLM_RL_ROUTES:
        routes.register(name, _not_yet(name))
    routes.register("liveness_probe", _liveness_probe)
    routes.register("get_weight_version", _get_weight_version)
    routes.register("set_weight_version", _set_weight_version)
    routes.register("flush_cache", _flush_cache)
    routes.register("abort_request", _abort_request)
    routes.register("update_weights_from_tensor", _update_weights_from_tensor)
    return routes


def _text_json(obj: Any, status: int) -> Response:
    return Response(
        content=dumps(obj).encode("utf-8"), status_code=status, headers={"content-type": TEXT_PLAIN}
    )


def _health_body(worker: EngineWorker) -> dict[str, Any]:
    uptime = max(0.0, time.monotonic() - worker.started_at)
    secs = int(uptime)
    return {
        "status": "ready",
        "uptime": {"secs": secs, "nanos": int((uptime - secs) * 1e9)},
        "endpoints": {RL_ENDPOINT: "ready", GENERATE_ENDPOINT: "ready"},
    }


def build_worker_admin_app(
    worker: EngineWorker, ledger: AdminLedger, routes: AdminRoutes
) -> Starlette:
    async def health(request: Request) -> Response:
        return _text_json(_health_body(worker), 200)

    async def not_found(request: Request, exc: Exception) -> Response:
        return Response("Route not found", 404, headers={"content-type": TEXT_PLAIN})

    async def engine(request: Request) -> Response:
        name = request.url.path[len(ENGINE_PREFIX) :]
        raw = await request.body()
        status, reply, body = await _dispatch(worker, routes, name, raw)
        ledger.record(worker.instance_id, request.method, request.url.path, body, status, reply)
        return _text_json(reply, status)

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/live", health, methods=["GET"]),
            Route("/engine/{route:path}", engine, methods=ALL_METHODS),
        ],
        exception_handlers={404: not_found},
    )


async def _dispatch(
    worker: EngineWorker, routes: AdminRoutes, name: str, raw: bytes
) -> tuple[int, dict[str, Any], Any]:
    """(HTTP status, reply, recorded body) for one /engine request."""
    body: Any = {}
    if raw.strip():
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return (
                400,
                {"error": "Invalid JSON", "message": str(exc)},
                raw.decode("utf-8", "replace"),
            )
    handler = routes.get(name)
    if handler is None:
        return 404, {"error": "Route not found", "message": f"Route /engine/{name} not found"}, body
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        return 200, {"status": "error", "message": "request body must be a JSON object"}, body
    try:
        return 200, await handler(worker, dict(body)), body
    except Exception as exc:  # a handler bug must look like Dynamo's 500, not kill the server
        return 500, {"error": "Handler error", "message": str(exc)}, body
