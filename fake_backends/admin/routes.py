"""The `/engine/<route>` table of a worker, and what a call of one route answers: the part of
a system server that has nothing to do with HTTP, so that the real-Dynamo worker
(`fake_backends.dynamo`) serves exactly the same routes through Dynamo's own system server.

The dispatch contract (CONTRACT-NOTES §U5.2, §O6.17): an unknown route is a 404
``{"error":"Route not found"}`` (200 ``{"status":"ok"}`` under the ``unknown_route_200``
fault); a missing body means ``{}``; a body that is JSON but not an object is a handled error
for vLLM's Python handlers (recorded) and a 500 for SGLang's request-object constructors; a
handler's dict is the 200 reply (handled failures are 200 too: clients must read the body); a
handler that raises is a 500 ``{"error":"Handler error"}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fake_backends.runtime.workers import EngineWorker

NON_OBJECT_MESSAGE = "request body must be a JSON object"

# The vLLM Python worker's advertised RL routes (CONTRACT-NOTES §U5.3).
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


class Refused(Exception):
    """Raised by a handler that refuses a call with an HTTP status of its own (a 4xx)."""

    def __init__(self, status: int, reply: dict[str, Any]) -> None:
        super().__init__(status, reply)
        self.status = status
        self.reply = reply


class AdminRoutes:
    """Name -> handler; a handler gets the worker and the request body (an object).

    ``advertised`` is what the worker lists in ``/v1/rl/workers`` (registered routes need
    not all be advertised); ``raise_on_non_object`` picks the SGLang behaviour for a body
    that is valid JSON but not an object.
    """

    def __init__(
        self,
        *,
        raise_on_non_object: bool = False,
        non_object_message: Callable[[str], str] | None = None,
    ) -> None:
        self._handlers: dict[str, AdminHandler] = {}
        self._advertised: set[str] = set()
        self.raise_on_non_object = raise_on_non_object
        self.non_object_message = non_object_message or (lambda route: NON_OBJECT_MESSAGE)

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


async def call(
    worker: EngineWorker, routes: AdminRoutes, name: str, body: Any
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, reply) of one call of route `name` with an already parsed `body`."""
    handler = routes.get(name)
    if handler is None:
        if worker.runtime.faults.active("unknown_route_200"):
            return 200, {"status": "ok"}
        return 404, {"error": "Route not found", "message": f"Route /engine/{name} not found"}
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        if routes.raise_on_non_object:
            message = f"/engine/{name} requires a JSON object body"
            return 500, {"error": "Handler error", "message": message}
        return 200, {"status": "error", "message": routes.non_object_message(name)}
    try:
        return 200, await handler(worker, dict(body))
    except Refused as refused:
        return refused.status, refused.reply
    except Exception as exc:  # a handler error must look like Dynamo's 500, not kill the server
        return 500, {"error": "Handler error", "message": str(exc)}
