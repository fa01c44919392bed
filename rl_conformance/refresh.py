"""The framework side of a policy refresh, as the spec lays it out ("Coordinate Policy Refresh"):
gate new rollout work, resolve workers and routes, pause, apply one policy, invalidate KV state,
verify every worker, run post-update generation, and only then reopen. The coordinator keeps the
fleet gated after any failure; `AdminFamily` holds the route names and bodies of each backend's
administration family (the backends do not share one schema).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from .admin import AdminClient, AdminWorker
from .checks import admin as admin_checks
from .checks.base import CheckResult
from .client import Client
from .target import Target
from .wire import Exchange

SYNTHETIC_WEIGHTS = "/conformance/weights"
"""Our fakes derive toy weights from any path; a real engine needs real checkpoints
(`--update-model-path`, given twice so that consecutive updates really change the weights)."""


def weight_paths(target: Target, given: tuple[str, ...]) -> tuple[str, ...] | None:
    """Model paths for weight updates on this target; None when none can be used safely."""
    if given:
        return given
    if target.kind == "fake" or target.versions.get("engine") == "fake-vllm":
        return ()
    return None


@dataclass(frozen=True)
class AdminFamily:
    name: str
    pause: str
    pause_body: dict[str, Any]
    resume: str
    update: str
    flush: str | None
    version: str | None

    def update_body(self, version: str, model_path: str | None = None) -> dict[str, Any]:
        path = model_path or f"{SYNTHETIC_WEIGHTS}/{version}"
        return {"model_path": path, "weight_version": version}

    @property
    def update_path(self) -> list[str]:
        return [
            route
            for route in (self.pause, self.resume, self.update, self.flush, self.version)
            if route
        ]


VLLM = AdminFamily(
    "vllm",
    "pause_generation",
    {"mode": "keep"},
    "resume_generation",
    "update_weights_from_disk",
    "flush_cache",
    "get_weight_version",
)
SGLANG = AdminFamily(
    "sglang",
    "pause_generation",
    {"mode": "in_place"},
    "continue_generation",
    "control/update_weights_from_disk",
    None,
    None,
)


def family_for(target: Target, worker: AdminWorker) -> AdminFamily | None:
    """The family a worker speaks: its advertised routes decide; SGLang workers advertise none."""
    if worker.routes is None:
        return SGLANG if target.backend == "sglang" else None
    if VLLM.pause in worker.routes:
        return VLLM
    return None


def new_version() -> str:
    return f"conformance-{uuid.uuid4().hex[:12]}"


def pinned_generation(
    client: Client,
    target: Target,
    worker: AdminWorker | None,
    prompt: list[int],
    *,
    deadline_s: float | None = None,
    max_tokens: int = 8,
) -> Exchange:
    """A greedy completion routed to one worker (nvext.backend_instance_id, and the header);
    unpinned when the worker, or its identity, is unknown."""
    body: dict[str, Any] = {
        "model": target.model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "nvext": {"extra_fields": ["completion_token_ids", "engine_data"]},
    }
    headers = {}
    if worker is not None and worker.instance_id is not None:
        body["nvext"]["backend_instance_id"] = worker.instance_id
        headers["x-dynamo-worker-instance-id"] = str(worker.instance_id)
    return client.request(
        "POST",
        target.url("/v1/completions"),
        json_body=body,
        headers=headers,
        deadline_s=deadline_s,
    )


def completion_ids(exchange: Exchange) -> list[int] | None:
    try:
        ids = exchange.json()["nvext"]["completion_token_ids"]
    except (ValueError, KeyError, TypeError):
        return None
    return ids if isinstance(ids, list) else None


def reported_version(exchange: Exchange) -> Any:
    try:
        return exchange.json()["nvext"]["engine_data"].get("weight_version")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


@dataclass
class StepResult:
    step: str
    worker: str
    result: CheckResult
    exchange: Exchange | None


@dataclass
class Coordinator:
    """One trainer's view of a fleet during refreshes. It never reopens after a failure."""

    admin: AdminClient
    family: AdminFamily
    workers: list[AdminWorker]
    gated: bool = False
    failures: list[str] = field(default_factory=list)
    admitted_while_gated: int = 0
    steps: list[StepResult] = field(default_factory=list)
    membership: tuple[Any, ...] = ()

    def gate(self) -> None:
        self.gated = True
        self.failures = []
        self.membership = tuple(sorted(str(worker.instance_id) for worker in self.workers))

    def admit(self) -> bool:
        """A rollout asks to be admitted; refused while the fleet is gated."""
        return not self.gated

    def observe_membership(self, workers: list[AdminWorker]) -> None:
        current = tuple(sorted(str(worker.instance_id) for worker in workers))
        if self.gated and current != self.membership:
            self.failures.append(f"membership changed from {self.membership} to {current}")

    def call_all(self, step: str, route: str, body: Any = None) -> list[StepResult]:
        results = []
        for worker in self.workers:
            exchange = self.admin.call(worker, route, body)
            try:
                parsed = exchange.json()
            except ValueError:
                parsed = None
            result = admin_checks.success_semantics(
                self.family.name, exchange.status, parsed, f"{route} on {worker.label}"
            )
            if not result.passed:
                self.failures.append(f"{step} failed on {worker.label}")
            step_result = StepResult(step, worker.label, result, exchange)
            self.steps.append(step_result)
            results.append(step_result)
        return results

    def reopen(self) -> bool:
        """Reopen only when every step since the gate succeeded."""
        if self.failures:
            return False
        self.gated = False
        return True
