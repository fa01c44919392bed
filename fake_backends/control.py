"""The loopback-only control port: switch faults on and off at run time.

``GET /faults`` lists the active faults (and the catalogue); ``POST /faults
{"faults": [...]}`` replaces the active set and answers the new list.  Requests from
anything but a loopback address are refused, so the port cannot be used to sabotage a
deployment from the network even if it is bound more widely by mistake.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fake_backends.faults import FAULT_NAMES, UnknownFaultError
from fake_backends.state import DeploymentState
from fake_backends.wire import json_response

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def _is_loopback(request: Request) -> bool:
    client = request.client
    return client is not None and (client.host in LOOPBACK or client.host.startswith("127."))


def build_control_app(state: DeploymentState) -> Starlette:
    async def faults(request: Request) -> Response:
        if not _is_loopback(request):
            return json_response({"error": "the control port only answers loopback clients"}, 403)
        if request.method == "GET":
            return json_response(
                {"faults": list(state.faults.names), "available": list(FAULT_NAMES)}
            )
        try:
            body: Any = json.loads(await request.body())
        except ValueError as exc:
            return json_response({"error": f"invalid JSON: {exc}"}, 400)
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

    return Starlette(routes=[Route("/faults", faults, methods=["GET", "POST"])])
