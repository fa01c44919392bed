"""A worker's system server: ``/health``, ``/live``, ``/metrics`` and ``/engine/<route>``.

The dispatch contract follows the CONTRACT-NOTES §U5.1-U5.2 and §O6.17: any
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

import asyncio
import json
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fake_backends.admin.routes import AdminRoutes, call
from fake_backends.encoding.json_text import dumps
from fake_backends.runtime.admin_ledger import AdminLedger
from fake_backends.runtime.workers import EngineWorker

ENGINE_PREFIX = "/engine/"
TEXT_PLAIN = "text/plain; charset=utf-8"
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]


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
    engine_call_delay_s: float = 0.0,
) -> Starlette:
    """The system server of one worker; ``endpoints`` are the ones ``/health`` reports.
    ``engine_call_delay_s`` makes every /engine call take that long before it acts, as a real
    engine's pause or weight update does (`--engine-call-delay-ms`)."""

    async def health(request: Request) -> Response:
        await _unless_crashed(worker)
        return _text_json(_health_body(worker, endpoints), 200)

    async def metrics(request: Request) -> Response:
        await _unless_crashed(worker)
        return Response(worker.counters.render(), 200, headers={"content-type": TEXT_PLAIN})

    async def not_found(request: Request, exc: Exception) -> Response:
        return Response("Route not found", 404, headers={"content-type": TEXT_PLAIN})

    async def engine(request: Request) -> Response:
        await _unless_crashed(worker)
        name = request.url.path[len(ENGINE_PREFIX) :]
        raw = await request.body()
        if engine_call_delay_s > 0:
            await asyncio.sleep(engine_call_delay_s)
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


async def _unless_crashed(worker: EngineWorker) -> None:
    """A worker whose process died answers nothing: the request waits until its client gives
    up (or the deployment stops)."""
    if worker.runtime.crashed:
        await asyncio.Event().wait()


async def dispatch(
    worker: EngineWorker, routes: AdminRoutes, name: str, raw: bytes
) -> tuple[int, dict[str, Any], Any]:
    """(HTTP status, reply, recorded body) for one /engine request: the system server parses
    the body, the route table does the rest (`routes.call`)."""
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
    status, reply = await call(worker, routes, name, body)
    return status, reply, body
