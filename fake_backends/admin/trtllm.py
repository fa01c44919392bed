"""TensorRT-LLM worker administration: the two memory routes Dynamo's TensorRT-LLM worker
registers on its system server (1.6.1 `trtllm/workers/llm_worker.py`, `_register_memory_routes`,
only with `--load-format gms`; the fake serves them as such a worker does).

`control/release_memory_occupation` refuses new requests, takes the generate endpoint out of
discovery, waits for the requests in flight (`timeout_s`, default 30), then pauses the engine;
`control/resume_memory_occupation` resumes it and rejoins discovery
(`trtllm/request_handlers/handler_base.py`). Replies carry `status` and `message`; a second
release or resume is answered `ok` with "already".
"""

from __future__ import annotations

import asyncio
from typing import Any

from fake_backends.admin.routes import AdminRoutes
from fake_backends.runtime.workers import EngineWorker

Body = dict[str, Any]
DEFAULT_DRAIN_S = 30.0


async def release_memory_occupation(worker: EngineWorker, body: Body) -> Body:
    runtime = worker.runtime
    if runtime.memory_released:
        return {"status": "ok", "message": "Memory already released"}
    runtime.routable = False
    try:
        await asyncio.wait_for(runtime.pause("wait"), float(body.get("timeout_s", DEFAULT_DRAIN_S)))
    except TimeoutError:
        runtime.resume()
        runtime.routable = True
        inflight = runtime.requests()
        return {
            "status": "error",
            "message": f"Timed out waiting for {inflight} in-flight request(s) to finish",
        }
    runtime.memory_released = True
    return {"status": "ok", "message": "Memory released"}


async def resume_memory_occupation(worker: EngineWorker, body: Body) -> Body:
    runtime = worker.runtime
    if not runtime.memory_released:
        return {"status": "ok", "message": "Memory already resumed"}
    runtime.memory_released = False
    runtime.resume()
    runtime.routable = True
    return {"status": "ok", "message": "Memory resumed"}


def trtllm_routes() -> AdminRoutes:
    """The `/engine` routes of a TensorRT-LLM worker (none advertised: no RL registration)."""
    routes = AdminRoutes(raise_on_non_object=True)
    routes.register("control/release_memory_occupation", release_memory_occupation, advertise=False)
    routes.register("control/resume_memory_occupation", resume_memory_occupation, advertise=False)
    return routes
