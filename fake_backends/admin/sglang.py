"""SGLang worker administration: built-in control routes, native routes, the allowlist.

SGLang workers are not listed by ``/v1/rl/workers``; the deployment hands out their
system URLs.  Their ``/engine`` surface (CONTRACT-NOTES §U5.4) has three parts:

* built-in ``control/*`` weight routes whose bodies are SGLang's request objects
  (``UpdateWeightFromDiskReqInput(**body)`` ...): a missing required field or an unknown
  one makes the constructor raise, which the dispatcher turns into a 500; replies carry
  ``success``/``message``, and handled failures are ``{"success": false}`` with HTTP 200;
* the default native routes ``pause_generation`` (modes abort|retract|in_place),
  ``continue_generation``, ``release_memory_occupation`` (drains, then the worker leaves
  routing) and ``resume_memory_occupation`` (rejoins).  A paused SGLang worker also leaves
  routing (Dynamo re-syncs registration with SGLang's pause state): unpinned requests go
  to the other workers, or wait if there is none;
* allowlisted methods of the fake SGLang engine (``sglang_engine_routes``), checked at
  start-up, with results normalized like Dynamo's (None -> ``{"status": "ok"}``, 2/3-tuples
  -> ``success``/``message``/``num_paused_requests``, non-objects -> ``{"result": ...}``).

``update_weight_version`` changes metadata only (tokens do not change) and aborts the
in-flight requests unless ``abort_all_requests`` is false (SGLang's default is true).
``clear_kv_blocks`` is a request-plane endpoint, not an ``/engine`` route: the fake
serves it on the control port.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from fake_backends.admin.routes import AdminHandler, AdminRoutes, HandlerError
from fake_backends.admin.sglang_routes import EngineRouteDescriptor, EngineRouteError
from fake_backends.runtime.weights import (
    checkpoint_weights,
    declare_version,
    load_weights,
    payload_weights,
)
from fake_backends.runtime.workers import EngineWorker

Body = dict[str, Any]
Method = Callable[[EngineWorker, Body], Awaitable[Any]]

SGLANG_PAUSE_MODES = ("abort", "retract", "in_place")
DEFAULT_WEIGHT_VERSION = "default"
DISK_OK = "Succeeded to update model weights."
ONLINE_OK = "Succeeded to update parameter online."
INJECTED_LOAD_FAILURE = "Failed to update weights: checkpoint could not be read (injected fault)."
ACTIVE_REQUESTS = "cannot clear KV blocks while requests are active"
CRASHES = "sglang_invalid_pause_mode_crashes"
IN_PLACE_UNFLUSHED = "sglang_in_place_update_unflushed"
UNFLUSHED = (
    "Weights were updated, but the cache was not flushed because requests are still running "
    "or queued. Retract or finish them, then call /flush_cache."
)
RETRACT_FLUSH_SKIPPED = "retract_flush_skipped"
RENAME_ABORTS_KEPT = "rename_aborts_kept_requests"
RENAME_MISSES_RECORD = "rename_misses_token_record"
FLUSH_REFUSED = "Cache not flushed because there are pending requests."
SECOND_PAUSE_FAILURE = (
    "Python callback failed: Exception: Unable to unregister endpoint instance from discovery. "
    "Check discovery service status"
)
"""What the real Dynamo 1.6.1 SGLang worker (file discovery) answers a second pause, with HTTP
500 (fixtures/dynamo-1.6.1/sglang-cpu/pause_while_paused.json)."""
_COMMON = ("rid", "http_worker_ipc")

# SGLang request objects: (name, required fields, optional fields).
DISK_REQ = (
    "UpdateWeightFromDiskReqInput",
    ("model_path",),
    (
        "load_format",
        "abort_all_requests",
        "weight_version",
        "is_async",
        "torch_empty_cache",
        "keep_pause",
        "recapture_cuda_graph",
        "token_step",
        "flush_cache",
        "manifest",
        *_COMMON,
    ),
)
TENSOR_REQ = (
    "UpdateWeightsFromTensorReqInput",
    ("serialized_named_tensors",),
    (
        "load_format",
        "flush_cache",
        "abort_all_requests",
        "weight_version",
        "selector",
        "torch_empty_cache",
        *_COMMON,
    ),
)
DISTRIBUTED_REQ = (
    "UpdateWeightsFromDistributedReqInput",
    ("names", "dtypes", "shapes"),
    (
        "group_name",
        "flush_cache",
        "abort_all_requests",
        "weight_version",
        "load_format",
        "selector",
        "torch_empty_cache",
        *_COMMON,
    ),
)
IPC_REQ = (
    "UpdateWeightsFromIPCReqInput",
    ("zmq_handles",),
    ("flush_cache", "weight_version", "torch_empty_cache", *_COMMON),
)
VERSION_REQ = ("UpdateWeightVersionReqInput", ("new_version",), ("abort_all_requests", *_COMMON))
UPDATE_FIELDS = ("weight_version", "flush_cache", "abort_all_requests", "torch_empty_cache")


def _construct(spec: tuple[str, tuple[str, ...], tuple[str, ...]], body: Body) -> Body:
    """Check ``body`` the way ``Req(**body)`` would; raise what the constructor raises."""
    name, required, optional = spec
    for key in body:
        if key not in required and key not in optional:
            raise HandlerError(f"{name}.__init__() got an unexpected keyword argument '{key}'")
    missing = [key for key in required if key not in body]
    if missing:
        listed = " and ".join(f"'{m}'" for m in missing)
        plural = "s" if len(missing) > 1 else ""
        raise HandlerError(
            f"{name}.__init__() missing {len(missing)} required positional argument{plural}: "
            f"{listed}"
        )
    return body


async def _apply_update(
    worker: EngineWorker, body: Body, tag: str, *, declare: bool = True
) -> None:
    """SGLang's update: abort if asked; wait for in-flight requests unless paused."""
    runtime = worker.runtime

    def apply() -> None:
        load_weights(
            worker,
            tag,
            version=body.get("weight_version"),
            declare=declare and body.get("weight_version") is not None,
            reset_cache=bool(body.get("flush_cache", True)),
        )

    if body.get("abort_all_requests", False):
        runtime.abort()
    if runtime.paused:
        apply()
        return
    async with runtime.quiesced():
        apply()


# -- the fake engine's methods (built-ins and allowlist share them) -------------------


async def update_weights_from_disk(worker: EngineWorker, body: Body) -> tuple[bool, str, int]:
    _construct(DISK_REQ, body)
    if worker.runtime.faults.active("admin_http200_failure_body"):
        return False, INJECTED_LOAD_FAILURE, 0
    runtime = worker.runtime
    holding = runtime.paused and runtime.pause_mode == "in_place" and bool(runtime.in_flight())
    if holding and runtime.faults.active(IN_PLACE_UNFLUSHED):
        # SGLang 0.5.23: the weights and version load, the flush a held request blocks does not
        await _apply_update(worker, {**body, "flush_cache": False}, disk_weights(worker, body))
        return False, UNFLUSHED, 0
    await _apply_update(worker, body, disk_weights(worker, body))
    return True, DISK_OK, 0


def disk_weights(worker: EngineWorker, body: Body) -> str:
    return checkpoint_weights(worker, str(body["model_path"]))


async def update_weights_from_tensor(worker: EngineWorker, body: Body) -> tuple[bool, str]:
    _construct(TENSOR_REQ, body)
    payload = body["serialized_named_tensors"]
    await _apply_update(worker, body, payload_weights("tensor", payload))
    return True, DISK_OK


async def update_weights_from_distributed(worker: EngineWorker, body: Body) -> tuple[bool, str]:
    try:
        _construct(DISTRIBUTED_REQ, body)
    except HandlerError:
        if worker.runtime.faults.active("distributed_update_fails_open"):
            return True, ONLINE_OK  # nothing loaded, success answered
        raise
    payload = {k: v for k, v in body.items() if k not in UPDATE_FIELDS}
    declare = not worker.runtime.faults.active("distributed_version_not_declared")
    await _apply_update(worker, body, payload_weights("distributed", payload), declare=declare)
    return True, ONLINE_OK


async def update_weights_from_ipc(worker: EngineWorker, body: Body) -> tuple[bool, str]:
    _construct(IPC_REQ, body)
    await _apply_update(worker, body, payload_weights("ipc", body["zmq_handles"]))
    return True, DISK_OK


async def update_weight_version(worker: EngineWorker, body: Body) -> Body:
    if "new_version" not in body and worker.runtime.faults.active("version_update_fails_open"):
        return {"success": True, "message": "Weight version updated to None", "new_version": None}
    _construct(VERSION_REQ, body)
    if body.get("abort_all_requests", True) or worker.runtime.faults.active(RENAME_ABORTS_KEPT):
        worker.runtime.abort()
    version = body["new_version"]
    worker.runtime.paused_renames += worker.runtime.paused
    if worker.scheduler_version is None and worker.runtime.faults.active(RENAME_MISSES_RECORD):
        named, declared = worker.sample_version()
        worker.scheduler_version = named if declared else DEFAULT_WEIGHT_VERSION
    declare_version(worker, version)
    return {
        "success": True,
        "message": f"Weight version updated to {version}",
        "new_version": version,
    }


async def pause_generation(worker: EngineWorker, body: Body) -> Body | None:
    mode = body.get("mode", "abort")
    if mode not in SGLANG_PAUSE_MODES:
        # A fault of the fake deployment only: behind the real Dynamo the worker's process and
        # system server are Dynamo's, and the engine-fault catalogue answers it off.
        if worker.runtime.faults.active(CRASHES):
            worker.runtime.crash()  # once this answer is sent, nothing more is
            return None
        return {
            "success": False,
            "message": f"Invalid mode '{mode}'; expected abort|retract|in_place",
        }
    runtime = worker.runtime
    if runtime.paused and worker.runtime.faults.active("sglang_second_pause_fails"):
        raise HandlerError(SECOND_PAUSE_FAILURE)
    if runtime.pause_applies:
        runtime.routable = False
    await runtime.pause(mode)
    return None


async def continue_generation(worker: EngineWorker, body: Body) -> None:
    runtime = worker.runtime
    runtime.resume()
    runtime.routable = not runtime.memory_released


def _tags_suffix(body: Body) -> str:
    tags = body.get("tags")
    return f" for tags: {tags}" if tags is not None else ""


async def release_memory_occupation(worker: EngineWorker, body: Body) -> Body:
    runtime = worker.runtime
    if runtime.memory_released:
        return {"status": "ok", "message": "Memory already released"}
    runtime.routable = False
    await runtime.pause("wait")
    runtime.memory_released = True
    return {"status": "ok", "message": "Memory released" + _tags_suffix(body)}


async def resume_memory_occupation(worker: EngineWorker, body: Body) -> Body:
    runtime = worker.runtime
    if not runtime.memory_released:
        return {"status": "ok", "message": "Memory already resumed"}
    runtime.memory_released = False
    runtime.resume()
    runtime.routable = True
    return {"status": "ok", "message": "Memory resumed" + _tags_suffix(body)}


async def flush_cache(worker: EngineWorker, body: Body) -> Body:
    """SGLang's scheduler flushes only when idle, and a paused one ignores its waiting queue
    (``is_fully_idle(ignore_waiting=self._engine_paused)``): after a ``retract`` pause, whose
    requests went back to that queue, the flush succeeds, and the retracted requests recompute
    their KV after ``continue_generation``; after ``in_place`` they still run, and it fails
    (``PauseGenerationReqInput``). ``retract_flush_skipped`` answers success after a retract
    pause and flushes nothing (SGLang's own /flush_cache answers 200 "Cache flushed ... (When
    there are running or waiting requests, the operation will not be performed.)")."""
    runtime = worker.runtime
    retracted = runtime.paused and runtime.pause_mode == "retract"
    if retracted and runtime.faults.active(RETRACT_FLUSH_SKIPPED):
        return {"success": True}
    if runtime.in_flight() and not retracted:
        return {"success": False, "message": FLUSH_REFUSED}
    runtime.flush(asked=True)
    return {"success": True}


async def get_weight_version(worker: EngineWorker, body: Body) -> Any:
    return worker.version if worker.version_declared else DEFAULT_WEIGHT_VERSION


async def get_server_info(worker: EngineWorker, body: Body) -> Body:
    """The launch record, as SGLang's: its `weight_version` is the one the worker started with,
    whatever updates followed (`get_model_info` reports the current one)."""
    return {
        "model_path": worker.model_name,
        "served_model_name": worker.model_name,
        "weight_version": DEFAULT_WEIGHT_VERSION,
        "tp_size": 1,
        "dp_size": 1,
        "pp_size": 1,
        "disaggregation_mode": "null",
        "version": "0.0.0-fake",
    }


async def get_model_info(worker: EngineWorker, body: Body) -> Body:
    return {
        "model_path": worker.model_name,
        "tokenizer_path": worker.model_name,
        "is_generation": True,
        "weight_version": await get_weight_version(worker, body),
    }


async def abort_request(worker: EngineWorker, body: Body) -> None:
    # SGLang matches by prefix; an empty rid without abort_all is ignored.
    if body.get("abort_all"):
        worker.runtime.abort()
        return
    rid = str(body.get("rid") or "")
    if rid:
        worker.runtime.abort(lambda g: any(i.startswith(rid) for i in g.ids()))


async def init_weights_update_group(worker: EngineWorker, body: Body) -> tuple[bool, str]:
    return True, "Succeeded to initialize custom process group."


async def destroy_weights_update_group(worker: EngineWorker, body: Body) -> tuple[bool, str]:
    return True, "Succeeded to destroy custom process group."


# Methods of the fake SGLang engine an allowlist may name, and on which target.
_BOTH = frozenset({"engine", "tm"})
ENGINE_METHODS: Mapping[str, tuple[Method, frozenset[str]]] = {
    "get_server_info": (get_server_info, frozenset({"engine"})),
    "get_model_info": (get_model_info, frozenset({"engine"})),
    "flush_cache": (flush_cache, _BOTH),
    "get_weight_version": (get_weight_version, _BOTH),
    "pause_generation": (pause_generation, frozenset({"tm"})),
    "continue_generation": (continue_generation, frozenset({"tm"})),
    "abort_request": (abort_request, frozenset({"tm"})),
    "init_weights_update_group": (init_weights_update_group, _BOTH),
    "destroy_weights_update_group": (destroy_weights_update_group, _BOTH),
    "update_weights_from_disk": (update_weights_from_disk, _BOTH),
    "update_weights_from_tensor": (update_weights_from_tensor, _BOTH),
    "update_weights_from_distributed": (update_weights_from_distributed, _BOTH),
    "release_memory_occupation": (release_memory_occupation, _BOTH),
    "resume_memory_occupation": (resume_memory_occupation, _BOTH),
}


def normalize(result: Any) -> Body:
    """A method's result as the JSON object Dynamo replies with."""
    if result is None:
        return {"status": "ok"}
    if isinstance(result, tuple) and len(result) in (2, 3):
        return dict(zip(("success", "message", "num_paused_requests"), result, strict=False))
    if isinstance(result, dict):
        return result
    return {"result": result}


def _normalized(method: Method) -> AdminHandler:
    async def handler(worker: EngineWorker, body: Body) -> Body:
        return normalize(await method(worker, body))

    return handler


BUILT_IN_ROUTES: Mapping[str, Method] = {
    "control/update_weights_from_disk": update_weights_from_disk,
    "control/update_weights_from_tensor": update_weights_from_tensor,
    "control/update_weights_from_distributed": update_weights_from_distributed,
    "control/update_weights_from_ipc": update_weights_from_ipc,
    "control/update_weight_version": update_weight_version,
}
NATIVE_ROUTES: Mapping[str, Method] = {
    "pause_generation": pause_generation,
    "continue_generation": continue_generation,
    "release_memory_occupation": release_memory_occupation,
    "resume_memory_occupation": resume_memory_occupation,
}
RESERVED_ROUTES = frozenset({*BUILT_IN_ROUTES, "control/start_profile", "control/stop_profile"})


async def _start_profile(worker: EngineWorker, body: Body) -> Body:
    return {"status": "ok", "message": "Profiling started"}


async def _stop_profile(worker: EngineWorker, body: Body) -> Body:
    return {"status": "ok", "message": "Profiling stopped"}


def resolve_engine_routes(
    descriptors: Sequence[EngineRouteDescriptor],
) -> list[tuple[str, AdminHandler]]:
    """Check every allowlisted method at start-up (unknown or colliding: an error)."""
    resolved: list[tuple[str, AdminHandler]] = []
    for d in descriptors:
        if d.path in RESERVED_ROUTES:
            raise EngineRouteError(
                f"Configured SGLang engine route /engine/{d.path} collides with a built-in route"
            )
        found = ENGINE_METHODS.get(d.method)
        if found is None or d.target not in found[1]:
            raise EngineRouteError(
                f"Invalid SGLang engine route descriptor for /engine/{d.path}: "
                f"{d.target} target has no method {d.method!r}"
            )
        resolved.append((d.path, _normalized(found[0])))
    return resolved


def sglang_routes(descriptors: Sequence[EngineRouteDescriptor] = ()) -> AdminRoutes:
    """The /engine routes of an SGLang worker (none are advertised: no RL registration)."""
    configured = resolve_engine_routes(descriptors)
    routes = AdminRoutes(raise_on_non_object=True)
    for path, method in BUILT_IN_ROUTES.items():
        routes.register(path, _normalized(method), advertise=False)
    routes.register("control/start_profile", _start_profile, advertise=False)
    routes.register("control/stop_profile", _stop_profile, advertise=False)
    for path, method in NATIVE_ROUTES.items():
        routes.register(path, _normalized(method), advertise=False)
    for path, handler in configured:  # a configured native path overrides the default
        routes.register(path, handler, advertise=False)
    return routes


async def clear_kv_blocks(worker: EngineWorker) -> Body:
    """The request-plane ``clear_kv_blocks`` endpoint: refuses while requests are active."""
    if worker.runtime.has_requests():
        return {"status": "error", "message": ACTIVE_REQUESTS}
    worker.runtime.flush()
    return {"status": "ok"}
