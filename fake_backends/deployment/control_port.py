"""The loopback-only control port: what a test needs to steer and observe a deployment.

* ``GET /faults`` lists the active faults (and the catalogue); ``POST /faults
  {"faults": [...]}`` replaces the active set and answers the new list;
* ``GET /request_ledger`` -> ``{"requests": [...]}`` (every generation attempt),
  ``DELETE /request_ledger``
  clears it;
* ``GET /admin_ledger`` -> ``{"requests": [...]}`` (every ``/engine`` call, oldest first),
  ``DELETE /admin_ledger`` clears it;
* ``GET /listener_env`` -> ``{"env": {...} | null}``; ``POST /listener_env
  {"env": {...} | null}`` replaces the environment the RL listener scopes discovery from
  (null: the process environment again), without a restart;
* ``POST /departure {"departed": true|false}``: the last worker's process goes away (its
  discovery entry stays, marked with an `error` and no routes, as Dynamo 1.6.1 lists a dead
  worker until its registration expires; the frontend stops routing to it) or comes back;
  answers ``{"instance_id": ..., "departed": ...}``;
* ``POST /probe_reply {"reply": VALUE} | {"hang": true} | {}``: what the last worker answers
  the RL listener's route probe: VALUE (any JSON), nothing at all, or its own reply again;
  answers ``{"instance_id": ..., "replaced": true|false}``;
* ``POST /engine_crash {"instance_id": N}``: that worker's engine dies and its sidecar starts it
  again at once: every request it was generating ends in an error, and it comes back on its
  starting weights with no version declared; answers ``{"instance_id": N, "ended": count}``;
* ``POST /worker_kill {"system_url": S, "killed": true|false}``: the process of the worker at
  system URL S is killed (every request it was generating loses its worker: the frontend
  migrates it under ``--migration-limit``, else it ends in an error) or started again;
  answers ``{"instance_id": ..., "killed": ..., "ended": count}``;
* ``POST /workers/{instance_id}/clear_kv_blocks``: the worker request-plane operation
  SGLang has instead of an ``/engine`` route (``{"status": "ok"}``, or an error while the
  worker has requests).

Requests from anything but a loopback address are refused, so the port cannot be used to
sabotage a deployment from the network even if it is bound more widely by mistake.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fake_backends.admin.sglang import clear_kv_blocks
from fake_backends.discovery.probes import HANG
from fake_backends.encoding.replies import json_response
from fake_backends.faults.deployment import FAULT_NAMES, UnknownFaultError
from fake_backends.runtime.admin_ledger import AdminRecord
from fake_backends.runtime.state import DeploymentState

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})

Handler = Callable[[Request], Awaitable[Response]]


def _is_loopback(request: Request) -> bool:
    client = request.client
    return client is not None and (client.host in LOOPBACK or client.host.startswith("127."))


def _loopback_only(handler: Handler) -> Handler:
    async def wrapped(request: Request) -> Response:
        if not _is_loopback(request):
            return json_response({"error": "the control port only answers loopback clients"}, 403)
        return await handler(request)

    return wrapped


async def _json_body(request: Request) -> Any:
    """The parsed body; raises ValueError with a message for the client."""
    try:
        return json.loads(await request.body())
    except ValueError as exc:
        raise ValueError(f"invalid JSON: {exc}") from None


def _object_body(handler: Callable[[dict[str, Any] | None], Awaitable[Response]]) -> Handler:
    """`handler` called with the JSON object the request carries (None: another JSON value); a
    body that is not JSON is a 400."""

    async def wrapped(request: Request) -> Response:
        try:
            body = await _json_body(request)
        except ValueError as exc:
            return json_response({"error": str(exc)}, 400)
        return await handler(body if isinstance(body, dict) else None)

    return wrapped


def admin_record_json(record: AdminRecord) -> dict[str, Any]:
    return {
        "instance_id": record.instance_id,
        "method": record.method,
        "path": record.path,
        "body": record.body,
        "status": record.status,
        "reply": record.reply,
        "received_at": record.received_at,
    }


def build_control_app(state: DeploymentState) -> Starlette:
    async def faults(request: Request) -> Response:
        if request.method == "GET":
            return json_response(
                {"faults": list(state.faults.names), "available": list(FAULT_NAMES)}
            )
        try:
            body = await _json_body(request)
        except ValueError as exc:
            return json_response({"error": str(exc)}, 400)
        names = body.get("faults") if isinstance(body, dict) else None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return json_response({"error": 'expected {"faults": [names...]}'}, 400)
        try:
            active = state.faults.set(names)
        except UnknownFaultError as exc:
            return json_response(
                {"error": str(exc), "unknown": list(exc.unknown), "valid": list(FAULT_NAMES)}, 400
            )
        return json_response({"faults": list(active)})

    async def request_ledger(request: Request) -> Response:
        if request.method == "DELETE":
            state.request_ledger.clear()
        return json_response({"requests": [r.to_json() for r in state.request_ledger.entries()]})

    async def admin_ledger(request: Request) -> Response:
        if request.method == "DELETE":
            state.admin_ledger.clear()
        return json_response(
            {"requests": [admin_record_json(r) for r in state.admin_ledger.entries()]}
        )

    async def listener_env(request: Request) -> Response:
        if request.method == "POST":
            try:
                body = await _json_body(request)
            except ValueError as exc:
                return json_response({"error": str(exc)}, 400)
            env = body.get("env", ...) if isinstance(body, dict) else ...
            if env is not None and not (
                isinstance(env, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
            ):
                return json_response(
                    {"error": 'expected {"env": {"NAME": "value", ...}} or {"env": null}'}, 400
                )
            state.set_listener_env(env)
        override = state.listener_env_override
        return json_response({"env": None if override is None else dict(override)})

    async def departure(body: dict[str, Any] | None) -> Response:
        departed = body.get("departed") if body is not None else None
        if not isinstance(departed, bool) or not state.workers:
            return json_response({"error": 'expected {"departed": true|false}'}, 400)
        worker = state.workers[-1]
        worker.runtime.departed = departed
        worker.runtime.registered = not departed
        return json_response({"instance_id": worker.instance_id, "departed": departed})

    async def probe_reply(body: dict[str, Any] | None) -> Response:
        if body is None or not state.workers or body.get("hang") not in (None, True):
            return json_response({"error": 'expected {"reply": VALUE}, {"hang": true} or {}'}, 400)
        worker = state.workers[-1]
        if body.get("hang"):
            state.probe_replies[worker.index] = HANG
        elif "reply" in body:
            state.probe_replies[worker.index] = body["reply"]
        else:
            state.probe_replies.pop(worker.index, None)
        replaced = worker.index in state.probe_replies
        return json_response({"instance_id": worker.instance_id, "replaced": replaced})

    async def engine_crash(body: dict[str, Any] | None) -> Response:
        raw = body.get("instance_id") if body is not None else None
        worker = state.router.find(raw) if isinstance(raw, int) else None
        if worker is None:
            return json_response(
                {"error": f'expected {{"instance_id": N}} of a worker: {raw}'}, 400
            )
        ended = worker.runtime.crash_engine()
        worker.restart_engine(
            keep_version=state.faults.active("recovered_worker_keeps_version"),
            keep_stamp=state.faults.active("recovered_samples_keep_version"),
        )
        return json_response({"instance_id": worker.instance_id, "ended": ended})

    async def worker_kill(body: dict[str, Any] | None) -> Response:
        url = body.get("system_url") if body is not None else None
        killed = body.get("killed") if body is not None else None
        worker = next((w for w in state.workers if url and w.system_url == url), None)
        if worker is None or not isinstance(killed, bool):
            return json_response(
                {"error": f'expected {{"system_url": S, "killed": true|false}} of a worker: {url}'},
                400,
            )
        ended = 0
        if killed:
            ended = worker.runtime.kill()
        else:
            worker.runtime.revive()
        return json_response({"instance_id": worker.instance_id, "killed": killed, "ended": ended})

    async def worker_clear_kv_blocks(request: Request) -> Response:
        raw = request.path_params["instance_id"]
        worker = state.router.find(int(raw)) if raw.isdigit() else None
        if worker is None:
            return json_response({"status": "error", "message": f"no worker {raw}"}, 404)
        return json_response(await clear_kv_blocks(worker))

    return Starlette(
        routes=[
            Route("/faults", _loopback_only(faults), methods=["GET", "POST"]),
            Route("/request_ledger", _loopback_only(request_ledger), methods=["GET", "DELETE"]),
            Route("/admin_ledger", _loopback_only(admin_ledger), methods=["GET", "DELETE"]),
            Route("/listener_env", _loopback_only(listener_env), methods=["GET", "POST"]),
            Route("/departure", _loopback_only(_object_body(departure)), methods=["POST"]),
            Route("/probe_reply", _loopback_only(_object_body(probe_reply)), methods=["POST"]),
            Route("/engine_crash", _loopback_only(_object_body(engine_crash)), methods=["POST"]),
            Route("/worker_kill", _loopback_only(_object_body(worker_kill)), methods=["POST"]),
            Route(
                "/workers/{instance_id}/clear_kv_blocks",
                _loopback_only(worker_clear_kv_blocks),
                methods=["POST"],
            ),
        ]
    )
