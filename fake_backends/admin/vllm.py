"""vLLM worker administration: the Python worker's RL routes and the native sidecar's.

Two route families, because two vLLM deployments can expose different ones (integration
reference, "Compare vLLM and SGLang Administration"):

* ``python`` (``dynamo.vllm --enable-rl``, facts §5.3): ``pause_generation``,
  ``update_weights_from_disk`` ... at ``/engine/<name>``; replies carry ``status``.
  Bodies and messages follow ``dynamo/vllm/handlers.py`` and the 1.6.1 recordings.
* ``sidecar`` (the native ``dynamo-vllm-sidecar``): ``control/*`` and ``update/*`` routes
  shaped after vLLM's own RL API (backend facts §A4): ``{"status": "paused"}``,
  ``{"message": "Weights updated"}`` ...  Handled failures answer
  ``{"status": "error", "message": ...}`` (HTTP 200), like every Dynamo ``/engine`` route.

Every handler acts on its worker's runtime, so pause really holds and freezes requests,
an update really changes the tokens, a flush really empties the prefix cache.
"""

from __future__ import annotations

from typing import Any

from fake_backends.admin.routes import VLLM_RL_ROUTES, AdminRoutes
from fake_backends.runtime.weights import (
    declare_version,
    load_weights,
    path_weights,
    payload_weights,
)
from fake_backends.runtime.workers import EngineWorker

Body = dict[str, Any]

PAUSE_FIRST = (
    "Worker must be paused via pause_generation() before updating weights. "
    "Call pause_generation() first, then update, then resume_generation()."
)
INJECTED_LOAD_FAILURE = "Failed to load weights: checkpoint could not be read (injected fault)"
VLLM_PAUSE_MODES = ("keep", "wait", "abort")
DISTRIBUTED_RESERVED = frozenset(
    {"allow_unpaused", "reset_prefix_cache", "weight_version", "engine_rpc"}
)


def _error(message: str, **extra: Any) -> Body:
    return {"status": "error", "message": message, **extra}


# -- the Python worker's routes ---------------------------------------------------------


async def liveness_probe(worker: EngineWorker, body: Body) -> Body:
    return {"status": "ok", "alive": True}


async def pause_generation(worker: EngineWorker, body: Body) -> Body:
    mode = body.get("mode", "keep")
    clear_cache = bool(body.get("clear_cache", False))
    if mode not in VLLM_PAUSE_MODES:
        return _error(f"Invalid mode '{mode}'; expected keep|wait|abort")
    await worker.runtime.pause(mode)
    if clear_cache and mode != "keep":  # vLLM ignores clear_cache in keep mode
        worker.runtime.flush()
    return {"status": "ok", "message": "Engine paused", "mode": mode, "clear_cache": clear_cache}


async def resume_generation(worker: EngineWorker, body: Body) -> Body:
    worker.runtime.resume()
    return {"status": "ok", "message": "Engine resumed"}


async def flush_cache(worker: EngineWorker, body: Body) -> Body:
    worker.runtime.flush()
    return {"status": "ok", "message": "Cache flushed"}


async def abort_request(worker: EngineWorker, body: Body) -> Body:
    # Like vLLM's abort of an unknown id, naming no in-flight request succeeds quietly.
    request_id = body.get("request_id")
    if not request_id:
        return _error("Missing 'request_id' in body")
    worker.runtime.abort_id(str(request_id))
    return {"status": "ok", "request_id": request_id}


async def get_weight_version(worker: EngineWorker, body: Body) -> Body:
    return {"status": "ok", "version": worker.version, "version_declared": worker.version_declared}


async def set_weight_version(worker: EngineWorker, body: Body) -> Body:
    # Metadata only: no pause needed, no cache reset, weights unchanged.
    if "weight_version" not in body:
        return _error("Missing 'weight_version' in body")
    declare_version(worker, body["weight_version"])
    return {"status": "ok", "version": body["weight_version"]}


def _update_reply(body: Body) -> Body:
    declared = "weight_version" in body
    return {
        "status": "ok",
        "version": body["weight_version"] if declared else "unknown",
        "version_declared": declared,
    }


async def update_weights_from_disk(worker: EngineWorker, body: Body) -> Body:
    if not worker.runtime.paused:
        return _error(PAUSE_FIRST)
    path = body.get("model_path")
    if not path:
        return _error("Missing 'model_path' in body")
    if worker.runtime.faults.active("admin_http200_failure_body"):
        return _error(INJECTED_LOAD_FAILURE)
    load_weights(
        worker,
        path_weights(str(path)),
        version=body.get("weight_version"),
        declare="weight_version" in body,
    )
    return _update_reply(body)


async def update_weights_from_distributed(worker: EngineWorker, body: Body) -> Body:
    allow_unpaused = body.get("allow_unpaused", False)
    reset_prefix_cache = body.get("reset_prefix_cache", True)
    if not isinstance(allow_unpaused, bool):
        return _error("'allow_unpaused' must be a boolean")
    if not isinstance(reset_prefix_cache, bool):
        return _error("'reset_prefix_cache' must be a boolean")
    if allow_unpaused and reset_prefix_cache:
        return _error(
            "Unpaused weight updates cannot reset the prefix cache. "
            "Set 'reset_prefix_cache' to false or pause generation first."
        )
    if not worker.runtime.paused and not allow_unpaused:
        return _error(PAUSE_FIRST)
    if not worker.weight_groups:  # vLLM's collective RPC fails without a group
        return _error("no weight update group: call init_weights_update_group first")
    payload = {k: v for k, v in body.items() if k not in DISTRIBUTED_RESERVED}
    load_weights(
        worker,
        payload_weights("distributed", payload),
        version=body.get("weight_version"),
        declare="weight_version" in body,
        reset_cache=reset_prefix_cache,
    )
    return _update_reply(body)


async def update_weights_from_tensor(worker: EngineWorker, body: Body) -> Body:
    return _error("update_weights_from_tensor is not implemented")


async def init_weights_update_group(worker: EngineWorker, body: Body) -> Body:
    worker.weight_groups.append(dict(body))
    return {"status": "ok", "message": "Weight update group initialized"}


async def destroy_weights_update_group(worker: EngineWorker, body: Body) -> Body:
    worker.weight_groups.clear()
    return {"status": "ok", "message": "Weight update group destroyed"}


def python_routes() -> AdminRoutes:
    """The vLLM Python worker's routes, all advertised (facts §5.3)."""
    routes = AdminRoutes()
    handlers = {
        "abort_request": abort_request,
        "destroy_weights_update_group": destroy_weights_update_group,
        "flush_cache": flush_cache,
        "get_weight_version": get_weight_version,
        "init_weights_update_group": init_weights_update_group,
        "liveness_probe": liveness_probe,
        "pause_generation": pause_generation,
        "resume_generation": resume_generation,
        "set_weight_version": set_weight_version,
        "update_weights_from_disk": update_weights_from_disk,
        "update_weights_from_distributed": update_weights_from_distributed,
        "update_weights_from_tensor": update_weights_from_tensor,
    }
    assert set(handlers) == set(VLLM_RL_ROUTES)
    for name, handler in handlers.items():
        routes.register(name, handler)
    return routes


# -- the native sidecar's routes --------------------------------------------------------

SIDECAR_PAUSE_MODES = ("abort", "wait", "keep")


class SidecarSession:
    """The weight-transfer lifecycle of one sidecar: init -> start -> update* -> finish."""

    def __init__(self) -> None:
        self.init_info: Any = None
        self.updating = False
        self.pending: list[Any] = []


def sidecar_routes() -> AdminRoutes:
    """One sidecar's routes (each worker gets its own: the transfer state is per worker)."""
    session = SidecarSession()

    async def pause(worker: EngineWorker, body: Body) -> Body:
        mode = body.get("mode", "abort")
        if mode not in SIDECAR_PAUSE_MODES:
            return _error(f"Invalid mode '{mode}'; expected abort|wait|keep")
        await worker.runtime.pause(mode)
        if body.get("clear_cache", False) and mode != "keep":
            worker.runtime.flush()
        return {"status": "paused"}

    async def resume(worker: EngineWorker, body: Body) -> Body:
        worker.runtime.resume()
        return {"status": "resumed"}

    async def is_paused(worker: EngineWorker, body: Body) -> Body:
        return {"is_paused": worker.runtime.paused}

    async def abort_requests(worker: EngineWorker, body: Body) -> Body:
        ids = body.get("request_ids")
        if ids is None:
            count = worker.runtime.abort()
        elif isinstance(ids, list) and all(isinstance(i, str) for i in ids):
            count = sum(worker.runtime.abort_id(i) for i in ids)
        else:
            return _error("'request_ids' must be a list of strings")
        return {"status": "aborted", "aborted": count}

    async def reset_prefix_cache(worker: EngineWorker, body: Body) -> Body:
        worker.runtime.flush()
        return {"success": True}

    async def get_weight_version(worker: EngineWorker, body: Body) -> Body:
        return {"weight_version": worker.version}

    async def init_weight_transfer_engine(worker: EngineWorker, body: Body) -> Body:
        if "init_info" not in body:
            return _error("Missing 'init_info' in request body")
        session.init_info = body["init_info"]
        return {"message": "Weight transfer initialized"}

    async def shutdown_weight_transfer_engine(worker: EngineWorker, body: Body) -> Body:
        session.init_info = None
        return {"message": "Weight transfer shut down"}

    async def start_weight_update(worker: EngineWorker, body: Body) -> Body:
        session.updating = True
        session.pending = []
        return {"message": "Weight update started"}

    async def update_weights(worker: EngineWorker, body: Body) -> Body:
        if "update_info" not in body:
            return _error("Missing 'update_info' in request body")
        if not session.updating:
            return _error("No weight update in progress; call start_weight_update first")
        session.pending.append(body["update_info"])
        return {"message": "Weights updated"}

    async def finish_weight_update(worker: EngineWorker, body: Body) -> Body:
        if not session.updating:
            return _error("No weight update in progress; call start_weight_update first")
        if worker.runtime.faults.active("admin_http200_failure_body"):
            return _error(INJECTED_LOAD_FAILURE)
        version = body.get("weight_version")
        load_weights(
            worker,
            payload_weights("transfer", session.pending),
            version=version,
            declare=version is not None,
        )
        session.updating = False
        session.pending = []
        return {"message": "Weight update finished"}

    async def update_weight_version(worker: EngineWorker, body: Body) -> Body:
        if "new_version" not in body:
            return _error("Missing 'new_version' in request body")
        declare_version(worker, body["new_version"])
        return {"success": True, "new_version": body["new_version"]}

    routes = AdminRoutes()
    for name, handler in {
        "control/pause": pause,
        "control/resume": resume,
        "control/is_paused": is_paused,
        "control/abort_requests": abort_requests,
        "control/reset_prefix_cache": reset_prefix_cache,
        "control/get_weight_version": get_weight_version,
        "update/init_weight_transfer_engine": init_weight_transfer_engine,
        "update/shutdown_weight_transfer_engine": shutdown_weight_transfer_engine,
        "update/start_weight_update": start_weight_update,
        "update/update_weights": update_weights,
        "update/finish_weight_update": finish_weight_update,
        "update/update_weight_version": update_weight_version,
    }.items():
        routes.register(name, handler)
    return routes
