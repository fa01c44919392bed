"""The vLLM Python worker's RL routes (``dynamo.vllm --enable-rl``, CONTRACT-NOTES §U5.3):
``pause_generation``, ``update_weights_from_disk`` ... at ``/engine/<name>``; replies carry
``status``. Bodies and messages follow ``dynamo/vllm/handlers.py`` and the 1.6.1 recordings.
The native sidecar's family is in ``vllm_sidecar``.

Every handler acts on its worker's runtime, so pause really holds and freezes requests,
an update really changes the tokens, a flush really empties the prefix cache.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fake_backends.admin.routes import VLLM_RL_ROUTES, AdminRoutes, Refused
from fake_backends.runtime.scheduler import POLL_SECONDS
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


def _pause_first(worker: EngineWorker) -> Body:
    """The refusal of an update to a running worker: Dynamo's handled error (HTTP 200), or the
    worker's own status (`unpaused_update_status`, e.g. 409 as lmdeploy answers, in FastAPI's
    ``detail`` shape)."""
    if worker.unpaused_update_status != 200:
        raise Refused(worker.unpaused_update_status, {"detail": PAUSE_FIRST})
    return _error(PAUSE_FIRST)


# -- the Python worker's routes ---------------------------------------------------------


async def liveness_probe(worker: EngineWorker, body: Body) -> Body:
    return {"status": "ok", "alive": True}


async def pause_generation(worker: EngineWorker, body: Body) -> Body:
    mode = body.get("mode", "keep")
    clear_cache = bool(body.get("clear_cache", False))
    runtime = worker.runtime
    if mode not in VLLM_PAUSE_MODES:
        if runtime.faults.active("invalid_pause_mode_accepted"):
            mode = "keep"
        else:
            if runtime.faults.active("invalid_pause_mode_pauses"):
                await runtime.pause("keep")
            return _error(f"Invalid mode '{mode}'; expected keep|wait|abort")
    if runtime.paused and runtime.faults.active("second_pause_hangs"):
        while runtime.paused:  # answered only once another caller resumes the worker
            await asyncio.sleep(POLL_SECONDS)
    await runtime.pause(mode)
    if clear_cache and mode != "keep":  # vLLM ignores clear_cache in keep mode
        worker.runtime.flush(asked=True)
    return {"status": "ok", "message": "Engine paused", "mode": mode, "clear_cache": clear_cache}


async def resume_generation(worker: EngineWorker, body: Body) -> Body:
    worker.runtime.resume()
    return {"status": "ok", "message": "Engine resumed"}


async def flush_cache(worker: EngineWorker, body: Body) -> Body:
    worker.runtime.flush(asked=True)
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
    if body["weight_version"] is not None or not worker.runtime.faults.active(
        "null_version_undeclared"
    ):
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
    if not worker.runtime.paused and not worker.runtime.faults.active("unpaused_update_applied"):
        return _pause_first(worker)
    path = body.get("model_path")
    if not path:
        return _error("Missing 'model_path' in body")
    if worker.runtime.faults.active("admin_http200_failure_body"):
        return _error(INJECTED_LOAD_FAILURE)
    unversioned = worker.runtime.faults.active("unversioned_update_declares")
    load_weights(
        worker,
        path_weights(str(path)),
        version=body.get("weight_version", "unknown"),
        declare="weight_version" in body or unversioned,
    )
    return _update_reply(body)


async def update_weights_from_distributed(worker: EngineWorker, body: Body) -> Body:
    allow_unpaused = body.get("allow_unpaused", False)
    reset_prefix_cache = body.get("reset_prefix_cache", True)
    if not isinstance(allow_unpaused, bool) or not isinstance(reset_prefix_cache, bool):
        if worker.runtime.faults.active("distributed_update_fails_open"):
            return _update_reply(body)  # nothing loaded, success answered
        field = "allow_unpaused" if not isinstance(allow_unpaused, bool) else "reset_prefix_cache"
        return _error(f"'{field}' must be a boolean")
    if allow_unpaused and reset_prefix_cache:
        return _error(
            "Unpaused weight updates cannot reset the prefix cache. "
            "Set 'reset_prefix_cache' to false or pause generation first."
        )
    if not worker.runtime.paused and not allow_unpaused:
        return _pause_first(worker)
    if not worker.weight_groups and not worker.runtime.faults.active(
        "distributed_update_without_group"
    ):
        # vLLM's collective RPC fails without a group
        return _error("no weight update group: call init_weights_update_group first")
    payload = {k: v for k, v in body.items() if k not in DISTRIBUTED_RESERVED}
    load_weights(
        worker,
        payload_weights("distributed", payload),
        version=body.get("weight_version"),
        declare="weight_version" in body
        and not worker.runtime.faults.active("distributed_version_not_declared"),
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
    """The vLLM Python worker's routes, all advertised (CONTRACT-NOTES §U5.3)."""
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
