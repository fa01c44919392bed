"""Worker administration from the client side: route negotiation and the mutation guard.

Safety rules, enforced here for every administrative call the suite makes:
- only routes a worker advertises are called, verbatim: `{system_url}/engine/{route}`, never a
  route with segments prepended, removed or renamed, never a URL derived from `request_plane_url`
  or `transport`;
- a worker without `system_url` is not administered;
- mutating routes need an explicit opt-in (`--allow-mutations`) and a worker chosen with
  `--worker INSTANCE_ID` or `--all-workers`; read-only routes (the Python worker's
  `liveness_probe` and `get_weight_version`, the sidecar's `control/is_paused`,
  `control/is_sleeping` and `control/get_weight_version`, SGLang's allowlistable
  `get_model_info` and `get_server_info`) and `/health` are always allowed;
- redirects are never followed (the client does not follow them at all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..client.http import Client
from ..model.mutations import MutationPolicy
from ..wire.exchange import Exchange
from .ledger import AdminLedger

FANOUT = 64
"""Administrative calls in flight at once when one step goes to many workers: a fleet of a
hundred workers is paused in about the time of two, each worker's system server still sees one
call from us at a time, and the client's connection pool (100) is never the queue."""
READ_ONLY_ROUTES = frozenset(
    {
        "liveness_probe",
        "get_weight_version",
        "control/is_paused",
        "control/is_sleeping",
        "control/get_weight_version",
        "get_model_info",
        "get_server_info",
    }
)


class RouteNotAdvertised(Exception):
    """The worker does not advertise what the call needs (fail closed)."""


@dataclass(frozen=True)
class AdminWorker:
    """A worker as the control plane sees it. `routes` is None when the deployment, not
    discovery, supplied the worker (SGLang: not registered with /v1/rl/workers)."""

    instance_id: int | None
    system_url: str | None
    routes: tuple[str, ...] | None
    namespace: str = ""
    model: str | None = None

    @classmethod
    def from_discovery(cls, worker: Mapping[str, Any]) -> AdminWorker:
        routes = worker.get("routes")
        return cls(
            instance_id=worker.get("instance_id"),
            system_url=worker.get("system_url"),
            routes=tuple(routes) if isinstance(routes, list) else (),
            namespace=str(worker.get("namespace", "")),
            model=worker.get("model"),
        )

    @property
    def label(self) -> str:
        if self.instance_id is None:
            return f"worker at {self.system_url}"
        return f"worker {self.instance_id}"


@dataclass
class AdminClient:
    client: Client
    policy: MutationPolicy
    calls: list[tuple[AdminWorker, str]] = field(default_factory=list)
    ledger: AdminLedger = field(default_factory=AdminLedger)
    """The run's: what each worker was last left in (`ledger`)."""

    def require(self, worker: AdminWorker, routes: Iterable[str]) -> None:
        """Fail closed unless the worker is administrable and advertises every route."""
        if not worker.system_url:
            raise RouteNotAdvertised(
                f"{worker.label} advertises no system_url; it is not administered"
            )
        if worker.routes is None:
            return
        missing = [route for route in routes if route not in worker.routes]
        if missing:
            raise RouteNotAdvertised(
                f"{worker.label} does not advertise required route(s) {missing}; "
                f"advertised: {list(worker.routes)}"
            )

    def url(self, worker: AdminWorker, route: str) -> str:
        assert worker.system_url is not None
        return f"{worker.system_url.rstrip('/')}/engine/{route}"

    def call(
        self, worker: AdminWorker, route: str, body: Any = None, *, deadline_s: float | None = None
    ) -> Exchange:
        self.require(worker, [route])
        if route not in READ_ONLY_ROUTES and not self.policy.permits(worker.instance_id):
            raise self.policy.refusal(f"{route} on {worker.label}")
        self.calls.append((worker, route))
        mutating = route not in READ_ONLY_ROUTES
        if mutating:
            self.ledger.sent(worker, route)
        status: int | None = None
        error: str | None = None
        try:
            exchange = self.client.request(
                "POST",
                self.url(worker, route),
                json_body={} if body is None else body,
                deadline_s=deadline_s,
            )
            status, error = exchange.status, exchange.error
        finally:
            if mutating:
                self.ledger.answered(worker, route, status, body, error)
        version = body.get("weight_version") if isinstance(body, dict) else None
        if isinstance(version, str) and version and exchange.status == 200:
            self.client.identity.policy_version = version
        return exchange

    def call_each(
        self,
        workers: Sequence[AdminWorker],
        route: str,
        body: Any = None,
        *,
        deadline_s: float | None = None,
        on_answer: Callable[[AdminWorker], None] | None = None,
    ) -> list[Exchange]:
        """One step on every worker, at most `FANOUT` calls in flight; the exchanges in the
        workers' order. Every worker is negotiated and permitted before any call is sent;
        `on_answer`, when given, is called with each worker as soon as its own call returns."""
        for worker in workers:
            self.require(worker, [route])
            if route not in READ_ONLY_ROUTES and not self.policy.permits(worker.instance_id):
                raise self.policy.refusal(f"{route} on {worker.label}")

        def one(worker: AdminWorker) -> Exchange:
            exchange = self.call(worker, route, body, deadline_s=deadline_s)
            if on_answer is not None:
                on_answer(worker)
            return exchange

        if len(workers) <= 1:
            return [one(worker) for worker in workers]
        with ThreadPoolExecutor(max_workers=min(FANOUT, len(workers))) as pool:
            return list(pool.map(one, workers))

    def health(self, worker: AdminWorker) -> Exchange:
        if not worker.system_url:
            raise RouteNotAdvertised(f"{worker.label} advertises no system_url")
        return self.client.get(f"{worker.system_url.rstrip('/')}/health")
