"""A worker's system server: ``/health``, ``/live``, ``/metrics`` and ``/engine/<route>``.

The dispatch contract follows the facts sheet §5.1-5.2 and observed 1.6.1 §6.17: any
method; empty body means ``{}``; invalid JSON is a 400 ``{"error":"Invalid JSON"}``;
an unknown route is a 404 ``{"error":"Route not found"}`` (200 ``{"status":"ok"}`` under
the ``unknown_route_200`` fault); a handler's dict is the 200 reply (handled failures are
200 too, with a failure body: clients must read it); a handler that raises is a 500
``{"error":"Handler error"}``; replies are JSON text sent as
``text/plain; charset=utf-8`` (``/health`` too; an unknown path is a plain-text 404
``Route not found``, as recorded from 1.6.1).  Every ``/engine`` request lands in the
admin ledger.

What a non-object JSON body does depends on the handler family: vLLM's Python handlers
answer a handled error (recorded), SGLang's request-object constructors raise (a 500).
The route tables themselves live with their backends (``vllm_admin``, ``sglang_admin``).
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

from fake_backends.encoding.json_text import dumps
from fake_backends.runtime.admin_ledger import AdminLedger
from fake_backends.runtime.workers import EngineWorker

ENGINE_PREFIX = "/engine/"
TEXT_PLAIN = "text/plain; charset=utf-8"
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
NON_OBJECT_MESSAGE = "request body must be a JSON object"

# The vLLM Python worker's advertised RL routes (facts §5.3).
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


class HandlerError(Exception):
    """Raised by a handler for what the real worker's code would raise (a 500)."""


class AdminRoutes:
    """Name -> handler; a handler gets the worker and the request body (an object).

    ``advertised`` is what the worker lists in ``/v1/rl/workers`` (registered routes need
    not all be advertised); ``raise_on_non_object`` picks the SGLang behaviour for a body
    that is valid JSON but not an object.
    """

    def __init__(self, *, raise_on_non_object: bool = False) -> None:
        self._handlers: dict[str, AdminHandler] = {}
        self._advertised: set[str] = set()
        self.raise_on_non_object = raise_on_non_object

    def register(self, name: str, handler: AdminHandler, *, advertise: bool = True) -> None:
        self._handlers[name] = handler
        if advertise:
            self._advertised.add(name)
        else:
            self._advertised.discard(name)

    def get(self, name: str) -> AdminHandler | None:
        return self._handlers.get(name)

    def names(self) -> tuple[str, ...]:
        """Every registered route name, sorted."""
        return tuple(sorted(self._handlers))

    def advertised(self) -> tuple[str, ...]:
        """The names the worker advertises to discovery, sorted."""
        return tuple(sorted(self._advertised))


def _text_json(obj: Any, status: int) -> Response:
    return Response(
        content=dumps(obj).encode("utf-8"), status_code=status, headers={"content-type": TEXT_PLAIN}
    )


def _health_body(worker: EngineWorker, endpoints: tuple[str, ...]) -> dict[str, Any]:
    uptime = max(0.0, time.monotonic() - worker.started_at)
    secs = int(uptime)
    return {
        "status": "ready",
        "uptime": {"secs": secs, "nanos": int((uptime - secs) * 1e9)},
        "endpoints": dict.fromkeys(endpoints, "ready"),
    }


def build_worker_admin_app(
    worker: EngineWorker,
    ledger: AdminLedger,
    routes: AdminRoutes,
    endpoints: tuple[str, ...] = ("rl", "generate"),
) -> Starlette:
    """The system server of one worker; ``endpoints`` are the ones ``/health`` reports."""

    async def health(request: Request) -> Response:
        return _text_json(_health_body(worker, endpoints), 200)

    async def metrics(request: Request) -> Response:
        return Response(worker.counters.render(), 200, headers={"content-type": TEXT_PLAIN})

    async def not_found(request: Request, exc: Exception) -> Response:
        return Response("Route not found", 404, headers={"content-type": TEXT_PLAIN})

    async def engine(request: Request) -> Response:
        name = request.url.path[len(ENGINE_PREFIX) :]
        raw = await request.body()
        status, reply, body = await dispatch(worker, routes, name, raw)
        ledger.record(worker.instance_id, request.method, request.url.path, body, status, reply)
        return _text_json(reply, status)

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/live", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/engine/{route:path}", engine, methods=ALL_METHODS),
        ],
        exception_handlers={404: not_found},
    )


async def dispatch(
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
        if worker.runtime.faults.active("unknown_route_200"):
            return 200, {"status": "ok"}, body
        return 404, {"error": "Route not found", "message": f"Route /engine/{name} not found"}, body
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        if routes.raise_on_non_object:
            message = f"/engine/{name} requires a JSON object body"
            return 500, {"error": "Handler error", "message": message}, body
        return 200, {"status": "error", "message": NON_OBJECT_MESSAGE}, body
    try:
        return 200, await handler(worker, dict(body)), body
    except Exception as exc:  # a handler error must look like Dynamo's 500, not kill the server
        return 500, {"error": "Handler error", "message": str(exc)}, body
