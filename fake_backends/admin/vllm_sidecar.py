"""The native vLLM sidecar's routes (``dynamo-vllm-sidecar --enable-rl``), one table per worker.

Shapes follow the sidecar (``lib/sidecar/vllm/src/engine.rs`` and ``lib/backend-common``; the
1.6.1 binary carries the same strings), which mirrors vLLM's own RL API under new names:

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

A validation failure caught before the engine call is HTTP 200 ``{"status": "error",
"message"}``; a failure inside the engine call (a missing ``init_info``, ``update_info`` or
``new_version``) is Dynamo's 500 ``{"error": "Handler error"}``. Sleep mode is off, so
``control/sleep`` and ``control/wake_up`` are not listed.

The weights of a transfer are derived from its payloads when it finishes; KV state is cleared by
the pause (``clear_cache``, vLLM's default ``True``), not by the update.
"""

from __future__ import annotations

from typing import Any

from fake_backends.admin.routes import AdminRoutes, HandlerError
from fake_backends.runtime.weights import declare_version, load_weights, payload_weights
from fake_backends.runtime.workers import EngineWorker

Body = dict[str, Any]

PAUSE_MODES = ("abort", "wait", "keep")
INJECTED_FAILURE = "Failed to finish weight update: engine rejected the weights (injected fault)"


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
        mode = body.get("mode", default)
        if mode not in PAUSE_MODES:
            return _error(f"invalid pause mode {mode!r}; expected one of abort, wait, keep")
        clear_cache = body.get("clear_cache", True)
        if not isinstance(clear_cache, bool):
            return _error("clear_cache must be a boolean")
        await worker.runtime.pause(mode)
        if clear_cache and mode != "keep":
            worker.runtime.flush()
        return status_word(worker, "paused")

    async def resume_generation(worker: EngineWorker, body: Body) -> Body:
        worker.runtime.resume()
        return status_word(worker, "resumed")

    async def is_paused(worker: EngineWorker, body: Body) -> Body:
        return {"is_paused": worker.runtime.paused}

    async def is_sleeping(worker: EngineWorker, body: Body) -> Body:
        return {"is_sleeping": False}

    async def get_weight_version(worker: EngineWorker, body: Body) -> Body:
        return {"weight_version": worker.version}

    async def update_weight_version(worker: EngineWorker, body: Body) -> Body:
        version = body.get("new_version")
        if not isinstance(version, str) or not version:
            raise HandlerError("update_weight_version requires a non-empty 'new_version' string")
        declare_version(worker, version)
        return {"success": True, "new_version": version}

    async def init_weight_transfer_engine(worker: EngineWorker, body: Body) -> Body:
        if not isinstance(body.get("init_info"), dict):
            raise HandlerError("init_weight_transfer_engine requires an 'init_info' object")
        session.initialised = True
        return {"message": "Weight transfer initialized"}

    async def start_weight_update(worker: EngineWorker, body: Body) -> Body:
        if not session.initialised:
            raise HandlerError("weight transfer engine is not initialized")
        session.updating = True
        session.pending = []
        return {"message": "Weight update started"}

    async def update_weights(worker: EngineWorker, body: Body) -> Body:
        if not isinstance(body.get("update_info"), dict):
            raise HandlerError("update_weights requires an 'update_info' object")
        if not session.updating:
            raise HandlerError("no weight update in progress: call start_weight_update first")
        session.pending.append(body["update_info"])
        return {"message": "Weights updated"}

    async def finish_weight_update(worker: EngineWorker, body: Body) -> Body:
        if not session.updating:
            raise HandlerError("no weight update in progress: call start_weight_update first")
        version = body.get("weight_version")
        if version is not None and not isinstance(version, str):
            return _error("weight_version must be a string")
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
            return _error("taints must be a list of strings")
        return {"status": "ok", "taints": sorted(set(taints))}

    routes = AdminRoutes()
    for name, handler in {
        "control/pause_generation": pause_generation,
        "control/resume_generation": resume_generation,
        "control/is_paused": is_paused,
        "control/is_sleeping": is_sleeping,
        "control/get_weight_version": get_weight_version,
        "update/update_weight_version": update_weight_version,
        "update/init_weight_transfer_engine": init_weight_transfer_engine,
        "update/start_weight_update": start_weight_update,
        "update/update_weights": update_weights,
        "update/finish_weight_update": finish_weight_update,
        "update/model_taints": model_taints,
    }.items():
        routes.register(name, handler)
    return routes
