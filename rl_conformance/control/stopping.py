"""The controls that take a worker out of routing and put it back, per administration family,
and the frontend's view of routing membership.

What is documented or shipped (Dynamo 1.6.1):

* SGLang: `release_memory_occupation` "unregisters and drains the worker;
  `resume_memory_occupation` restores it" (spec, administration table). Dynamo's SGLang worker
  also re-syncs its registration with SGLang's pause state after every native route, so a paused
  worker leaves routing until `continue_generation` (`sglang/request_handlers/handler_base.py`,
  `_sync_discovery_with_sglang_pause_state`; ai-dynamo/dynamo PR #15078 fixed paused workers
  still routed to).
* vLLM native sidecar: its pause unregisters the generate endpoint (recorded:
  `fixtures/dynamo-1.6.1/vllm-sidecar/completion_while_paused.json`, the model leaves
  `/v1/models`), and `control/sleep` / `control/wake_up`, when advertised, leave and rejoin.
* TensorRT-LLM: `control/release_memory_occupation` / `control/resume_memory_occupation`
  unregister, drain and restore, served only by workers started with `--load-format gms`
  (`trtllm/workers/llm_worker.py`, `_register_memory_routes`).
* The vLLM Python worker holds requests while paused and stays routed
  (`fixtures/dynamo-1.6.1/toy-worker/flow_10_completion_held_during_pause.json`); its
  `control/sleep` is registered but not advertised, so a client may not call it.

Routing membership is read where a user reads it: the frontend's `/health` lists the instances it
routes to (`instances[]`, endpoint `generate`); a departed instance leaves that list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..client.http import Client
from ..model.target import Target
from ..wire.exchange import Exchange
from .admin import AdminWorker
from .families import SGLANG, VLLM_SIDECAR, AdminFamily

GENERATE_ENDPOINT = "generate"


@dataclass(frozen=True)
class StopControl:
    """One way to take a worker out of routing (`stop`) and bring it back (`restore`)."""

    name: str
    stop: str
    restore: str
    success_family: str
    """Whose success semantics judge the replies."""
    body: Mapping[str, Any] = field(default_factory=dict)
    absent_unless: str = ""
    """Non-empty when a worker may lack the control for a reason of its own start-up (the flag
    named here): a 404 then means the control is absent, not broken."""


def stop_controls(
    target: Target, family: AdminFamily | None, worker: AdminWorker
) -> list[StopControl]:
    """The controls `worker` offers that take it out of routing, in the order they are tried."""
    if family is SGLANG:
        return [
            StopControl("pause", family.pause, family.resume, family.name, family.pause_body()),
            StopControl(
                "memory release",
                "release_memory_occupation",
                "resume_memory_occupation",
                family.name,
            ),
        ]
    if family is VLLM_SIDECAR:
        controls = [
            StopControl("pause", family.pause, family.resume, family.name, family.pause_body())
        ]
        if {"control/sleep", "control/wake_up"} <= set(worker.routes or ()):
            controls.append(StopControl("sleep", "control/sleep", "control/wake_up", family.name))
        return controls
    if family is None and target.backend == "trtllm":
        return [
            StopControl(
                "memory release",
                "control/release_memory_occupation",
                "control/resume_memory_occupation",
                "trtllm",
                absent_unless="--load-format gms",
            )
        ]
    return []


def routed_instances(client: Client, target: Target, *, deadline_s: float) -> set[int] | None:
    """The generate instances the frontend's `/health` lists; None when it lists none at all
    (`instances` absent, or not a list: membership is then not observable there)."""
    exchange = client.get(target.url("/health"), deadline_s=deadline_s)
    try:
        body = exchange.json()
    except ValueError:
        return None
    instances = body.get("instances") if isinstance(body, dict) else None
    if not isinstance(instances, list):
        return None
    return {
        instance["instance_id"]
        for instance in instances
        if isinstance(instance, dict)
        and instance.get("endpoint") == GENERATE_ENDPOINT
        and isinstance(instance.get("instance_id"), int)
    }


def served_by(exchange: Exchange) -> int | None:
    """The instance that served a completion asked for `nvext.extra_fields: ["worker_id"]`."""
    try:
        body = exchange.json()
    except ValueError:
        return None
    nvext = body.get("nvext") if isinstance(body, dict) else None
    worker = nvext.get("worker_id") if isinstance(nvext, dict) else None
    decode = worker.get("decode_worker_id") if isinstance(worker, dict) else None
    return decode if isinstance(decode, int) else None
