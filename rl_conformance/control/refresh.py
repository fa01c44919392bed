"""The framework side of a policy refresh, as the spec lays it out ("Coordinate Policy Refresh"):
gate new rollout work, resolve workers and routes, pause, apply one policy, invalidate KV state,
verify every worker, run post-update generation, and only then reopen. The coordinator keeps the
fleet gated after any failure; the route names and bodies of each family are in `families`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..checks import admin as admin_checks
from ..checks.base import CheckResult
from ..client.http import Client
from ..model.target import Target
from ..wire.exchange import Exchange
from .admin import AdminClient, AdminWorker
from .families import AdminFamily


def pinned_generation(
    client: Client,
    target: Target,
    worker: AdminWorker | None,
    prompt: list[int],
    *,
    deadline_s: float | None = None,
    max_tokens: int = 8,
    extra_fields: tuple[str, ...] = ("completion_token_ids", "engine_data"),
    **fields: Any,
) -> Exchange:
    """A greedy completion routed to one worker (nvext.backend_instance_id, and the header);
    unpinned when the worker, or its identity, is unknown. `fields` join the request body."""
    body: dict[str, Any] = {
        "model": target.model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        **fields,
        "nvext": {"extra_fields": list(extra_fields)},
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


INFO_DEADLINE_S = 10.0


def info_version(
    admin: AdminClient, worker: AdminWorker, family: AdminFamily
) -> tuple[str, Any] | None:
    """(route, weight version) from the first of the family's read-only info routes the worker
    serves (HTTP 200 with the version key); None when it serves none of them (not allowlisted)."""
    for route in family.info_routes:
        exchange = admin.call(worker, route, {}, deadline_s=INFO_DEADLINE_S)
        body = exchange.reply()
        if exchange.status == 200 and isinstance(body, Mapping) and family.info_version_key in body:
            return route, body[family.info_version_key]
    return None


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

    def gate(self) -> None:
        self.gated = True
        self.failures = []

    def admit(self) -> bool:
        """A rollout asks to be admitted; refused while the fleet is gated."""
        return not self.gated

    def call_all(self, step: str, route: str, body: Any = None) -> list[StepResult]:
        """One step on every worker at once (bounded, `admin.FANOUT`), judged in order."""
        exchanges = self.admin.call_each(self.workers, route, body)
        return [
            self.judge(step, worker, route, exchange)
            for worker, exchange in zip(self.workers, exchanges, strict=True)
        ]

    def call_one(self, step: str, worker: AdminWorker, route: str, body: Any = None) -> StepResult:
        return self.judge(step, worker, route, self.admin.call(worker, route, body))

    def judge(self, step: str, worker: AdminWorker, route: str, exchange: Exchange) -> StepResult:
        try:
            parsed = exchange.json()
        except ValueError:
            parsed = None
        result = admin_checks.success_semantics(
            self.family.name, route, exchange.status, parsed, worker.label
        )
        if not result.passed:
            self.failures.append(f"{step} failed on {worker.label}")
        step_result = StepResult(step, worker.label, result, exchange)
        self.steps.append(step_result)
        return step_result

    def reopen(self) -> bool:
        """Reopen only when every step since the gate succeeded."""
        if self.failures:
            return False
        self.gated = False
        return True
