"""The native vLLM sidecar's routes (``dynamo-vllm-sidecar --enable-rl``), one table per worker.

Shapes follow the real 1.6.1 sidecar as recorded in ``fixtures/dynamo-1.6.1/vllm-sidecar/``
(replayed by ``tests/fake_backends/admin/test_fake_admin_vllm_sidecar.py``) and its source
(``lib/sidecar/vllm/src/engine.rs``, ``lib/backend-common``), which mirrors vLLM's own RL API
under new names:

* ``control/pause_generation`` ``{mode?: abort|wait|keep (default abort), clear_cache?}`` →
  ``{"status": "paused"}``; ``control/resume_generation`` → ``{"status": "resumed"}``;
  ``control/is_paused`` → ``{"is_paused": bool}``; ``control/is_sleeping`` →
  ``{"is_sleeping": bool}``; ``control/get_weight_version`` → ``{"weight_version": ...}`` (no
  status key);
* ``update/update_weight_version`` ``{new_version}`` → ``{"success": true, "new_version"}``;
* the weight-transfer lifecycle, listed only when vLLM has weight transfer enabled (this fake
  always has): ``update/init_weight_transfer_engine`` ``{init_info: object}``,
  ``update/start_weight_update``, ``update/update_weights`` ``{update_info: object}``,
  ``update/finish_weight_update`` ``{weight_version?}``, each answering ``{"message": ...}``;
* ``update/model_taints`` (Dynamo's own route on every Rust backend) ``{taints}`` →
  ``{"status": "ok", "taints": [sorted]}``.

A control body that fails validation (a bad ``mode``), or a body that is not an object, is
HTTP 200 ``{"status": "error", "message"}``; an update body that fails validation (a missing
``init_info``, ``update_info`` or ``new_version``) and any engine failure are Dynamo's 500
``{"error": "Handler error"}``. A pause unregisters the worker's generate endpoint before the
engine call (the model leaves ``/v1/models``, requests get 503 at once); a second pause fails
there, without reaching the engine; resume registers it again. Sleep mode is off, so
``control/sleep`` and ``control/wake_up`` are not listed. The ordering of the transfer (init
before start, start before update and finish) is this fake's model of vLLM; the sidecar itself
passes every call through.

The weights of a transfer are derived from its payloads when it finishes; KV state is cleared by
the pause (``clear_cache``, vLLM's default ``True``), not by the update.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fake_backends.admin.routes import AdminRoutes, HandlerError
from fake_backends.runtime.weights import (
    declare_version,
    load_weights,
    payload_weights,
)
from fake_backends.runtime.workers import EngineWorker

Body = dict[str, Any]

PAUSE_MODES = ("abort", "wait", "keep")
ALREADY_UNREGISTERED = (
    "failed to unregister endpoint before /engine/control/pause_generation: Unable to "
    "unregister endpoint instance from discovery. Check discovery service status"
)
NOT_STARTED = "InvalidRequest: no weight update in progress: call start_weight_update first"
INJECTED_FAILURE = "Failed to finish weight update: engine rejected the weights (injected fault)"


Handler = Callable[[EngineWorker, Body], Awaitable[Body]]


def gauged(operation: str, handler: Handler) -> Handler:
    """`handler` counted in the worker's weight-transfer gauge while it runs, as vLLM's
    `WeightOperationMetrics.record` does: back to 0 whether it succeeded or failed, unless
    ``weight_update_gauge_stuck`` skips the decrement when it fails."""

    async def run(worker: EngineWorker, body: Body) -> Body:
        worker.counters.operation_started(operation)
        failed = True
        try:
            reply = await handler(worker, body)
            failed = False
            return reply
        finally:
            if not (failed and worker.runtime.faults.active("weight_update_gauge_stuck")):
                worker.counters.operation_ended(operation)

    return run


def _non_object_message(route: str) -> str:
    kind = "control" if route.startswith("control/") else "update"
    return f"engine {kind} request body must be a JSON object"


def _error(message: str) -> Body:
    return {"status": "error", "message": message}


class TransferSession:
    """One worker's weight-transfer lifecycle: init → start → update* → finish."""

    def __init__(self) -> None:
        self.initialised = False
        self.updating = False
        self.pending: list[Any] = []


def sidecar_routes() -> AdminRoutes:
    """One sidecar's routes (each worker gets its own: the transfer state is per worker)."""
    session = TransferSession()

    def status_word(worker: EngineWorker, word: str) -> Body:
        if worker.runtime.faults.active("sidecar_status_words"):
            return {"status": "ok"}
        return {"status": word}

    async def pause_generation(worker: EngineWorker, body: Body) -> Body:
        default = "keep" if worker.runtime.faults.active("sidecar_pause_default_keep") else "abort"
        mode = body.get("mode") or default
        if not isinstance(mode, str):
            return _error("InvalidRequest: `mode` must be a string")
        if mode not in PAUSE_MODES:
            return _error(
                f"InvalidRequest: pause_generation mode must be abort, wait, or keep; got `{mode}`"
            )
        clear_cache = body.get("clear_cache", True)
        if not isinstance(clear_cache, bool):
            return _error("InvalidRequest: `clear_cache` must be a boolean")
        if not worker.runtime.registered:
            return _error(ALREADY_UNREGISTERED)
        worker.runtime.registered = False  # unregistered before the engine call, and stays so
        await worker.runtime.pause(mode)
        if clear_cache and mode != "keep":
            worker.runtime.flush(asked=True)
        return status_word(worker, "paused")

    async def resume_generation(worker: EngineWorker, body: Body) -> Body:
        worker.runtime.resume()
        worker.runtime.registered = True
        return status_word(worker, "resumed")

    async def is_paused(worker: EngineWorker, body: Body) -> Body:
        return {"is_paused": worker.runtime.paused}

    async def is_sleeping(worker: EngineWorker, body: Body) -> Body:
        return {"is_sleeping": False}

    async def get_weight_version(worker: EngineWorker, body: Body) -> Body:
        # vLLM's gRPC field is a plain string: "" until a version is named.
        return {"weight_version": "" if worker.version is None else worker.version}

    async def update_weight_version(worker: EngineWorker, body: Body) -> Body:
        version = body.get("new_version")
        if version is not None and not isinstance(version, str):
            raise HandlerError("InvalidRequest: `new_version` must be a string")
        if not version:
            if worker.runtime.faults.active("version_update_fails_open"):
                return {"success": True, "new_version": version}  # nothing declared
            raise HandlerError("InvalidRequest: missing non-empty `new_version` string")
        declare_version(worker, version)
        return {"success": True, "new_version": version}

    async def init_weight_transfer_engine(worker: EngineWorker, body: Body) -> Body:
        if not isinstance(body.get("init_info"), dict):
            raise HandlerError("InvalidRequest: missing `init_info` JSON object")
        session.initialised = True
        return {"message": "Weight transfer initialized"}

    async def start_weight_update(worker: EngineWorker, body: Body) -> Body:
        if not session.initialised:
            raise HandlerError("InvalidRequest: weight transfer engine is not initialized")
        session.updating = True
        session.pending = []
        return {"message": "Weight update started"}

    async def update_weights(worker: EngineWorker, body: Body) -> Body:
        if not isinstance(body.get("update_info"), dict):
            raise HandlerError("InvalidRequest: missing `update_info` JSON object")
        if not session.updating:
            raise HandlerError(NOT_STARTED)
        session.pending.append(body["update_info"])
        return {"message": "Weights updated"}

    async def finish_weight_update(worker: EngineWorker, body: Body) -> Body:
        version = body.get("weight_version")
        if version is not None and not isinstance(version, str):
            raise HandlerError("InvalidRequest: `weight_version` must be a string")
        if not session.updating:
            raise HandlerError(NOT_STARTED)
        session.updating = False
        pending, session.pending = session.pending, []
        if worker.runtime.faults.active("admin_http200_failure_body"):
            return _error(INJECTED_FAILURE)
        load_weights(
            worker,
            payload_weights("transfer", pending),
            version=version,
            declare=version is not None,
            reset_cache=False,
        )
        return {"message": "Weight update finished"}

    async def model_taints(worker: EngineWorker, body: Body) -> Body:
        taints = body.get("taints")
        if not isinstance(taints, list) or not all(isinstance(t, str) for t in taints):
            raise HandlerError("'taints' must be a JSON array of strings")
        return {"status": "ok", "taints": sorted(set(taints))}

    routes = AdminRoutes(non_object_message=_non_object_message)
    for name, handler in {
        "control/pause_generation": pause_generation,
        "control/resume_generation": resume_generation,
        "control/is_paused": is_paused,
        "control/is_sleeping": is_sleeping,
        "control/get_weight_version": get_weight_version,
        "update/update_weight_version": update_weight_version,
        "update/init_weight_transfer_engine": gauged("init", init_weight_transfer_engine),
        "update/start_weight_update": gauged("start", start_weight_update),
        "update/update_weights": gauged("update", update_weights),
        "update/finish_weight_update": gauged("finish", finish_weight_update),
        "update/model_taints": model_taints,
    }.items():
        routes.register(name, handler)
    return routes
