"""Administrative steps as the suites take them: which workers to act on, each call checked by
status AND body, pauses that always end in a resume. Shared by the administration and refresh
suites."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..checks import admin as admin_checks
from ..model.capabilities import RL_WORKERS, Backend, Support
from ..model.mutations import MutationPolicy
from ..model.target import Target
from ..model.verdict import FeatureAbsent, MissingInput, Verdict
from ..model.worker_sample import WorkerSample
from ..wire.exchange import Exchange
from .admin import AdminClient, AdminWorker, RouteNotAdvertised
from .families import AdminFamily, NewWeights, family_for, update_unavailable
from .refresh import pinned_generation
from .stopping import routed_instances
from .weights import WeightSource

Judge = Callable[[Verdict, "AdminFamily", str, AdminWorker, Exchange], Any]
"""How one worker's answer to a step is judged; returns the parsed reply."""

DRAIN_DEADLINE_S = 300.0
"""A pause that waits for the requests in flight: as long as an in-flight stream may take."""
REJOIN_S = 30.0
"""A worker that left routing while paused (SGLang's) is back in the frontend's routing within
this long after its resume answered (`admin.stopped_worker_unrouted` holds it to the same)."""
NOT_READY = (404, 503)
"""A frontend with no instance ready: 503 "not ready", or 404 while the only worker of the model
is out of discovery and the model itself is unlisted."""
READY_PROBE = [640, 1024, 777]
"""A one-token generation that asks whether the frontend has an instance ready again."""


@dataclass(frozen=True)
class Selection:
    """The workers a test acts on: every administrable worker of one family the run may mutate.

    Workers are ordered by identity, never by their place in discovery's list (a listener may
    list the same workers in another order on every read): (namespace, instance_id), workers the
    run may mutate first. Every test of a run so acts on the same workers, and what one test
    leaves on them (the checkpoint each loaded last) is what the next test finds there. A control
    effect is judged on the sampled workers (`judged`), or on every selected worker where the
    spec asks it of each (`each_worker`): by a generation pinned to it where its identity is
    known; where no selected worker's identity is known (workers given by URL whose system
    servers name no instance id), by generations left unpinned, which any of them may serve,
    and no one worker is then judged alone. Every step is still taken on every selected worker.
    """

    workers: tuple[AdminWorker, ...]
    family: AdminFamily
    target: Target | None = field(default=None, compare=False)
    sample: WorkerSample = field(default=WorkerSample(), compare=False)

    @property
    def judged(self) -> tuple[AdminWorker, ...]:
        """The workers an effect the spec does not ask of every worker is read on: the run's
        sample of `workers` (`model.worker_sample`), every one by default."""
        return self.sample.pick(self.workers)

    @property
    def sampled(self) -> bool:
        """Whether `judged` leaves selected workers out."""
        return len(self.judged) < len(self.workers)

    @property
    def pinned(self) -> AdminWorker | None:
        """The first worker, for a step taken on one worker only; None when its identity is
        unknown (generations stay unpinned)."""
        first = self.workers[0]
        return first if first.instance_id is not None else None

    @property
    def label(self) -> str:
        return ", ".join(worker.label for worker in self.workers)


def instance_of(selection: Selection) -> int | None:
    """The instance id of the first selected worker, when its identity is known."""
    return selection.pinned.instance_id if selection.pinned is not None else None


def administered(target: Target, workers: list[AdminWorker]) -> list[AdminWorker]:
    """The workers with a system URL, or why there are none: a registering backend (vLLM) that
    lists none lacks a documented feature; for the others the user has not given their URLs."""
    found = [worker for worker in workers if worker.system_url]
    if found:
        return found
    if RL_WORKERS[Backend(target.backend)] is Support.SUPPORTED:
        if not target.rl_url:
            raise MissingInput("no RL listener URL to discover workers from (give --rl-url)")
        raise FeatureAbsent("GET /v1/rl/workers lists no worker with a system_url")
    raise MissingInput(
        f"{target.backend} workers are not listed by /v1/rl/workers: give each worker's "
        "system URL with --worker-url"
    )


def by_identity(
    workers: Sequence[AdminWorker], policy: MutationPolicy | None = None
) -> list[AdminWorker]:
    """The workers in identity order: those `policy` lets the run mutate first (when it names
    any); discovery's workers before workers given by URL; known instance ids by (namespace,
    instance_id), then workers of unknown identity in the order the user gave their URLs.
    Discovery's own order plays no part."""

    def key(worker: AdminWorker) -> tuple[bool, bool, bool, str, float, str]:
        instance_id = worker.instance_id
        # a listener may send an id that is no integer (a rounded float): it still sorts
        numeric = isinstance(instance_id, (int, float)) and not isinstance(instance_id, bool)
        return (
            policy is not None and policy.allowed and not policy.permits(instance_id),
            worker.routes is None,
            instance_id is None,
            worker.namespace,
            instance_id if numeric and instance_id is not None else 0,
            "" if numeric or instance_id is None else str(instance_id),
        )

    return sorted(workers, key=key)


def select(
    target: Target, workers: list[AdminWorker], policy: MutationPolicy | None = None
) -> Selection:
    """See `Selection`; `policy`, when it allows mutations, keeps to the workers it permits
    (the first one at least, whose refusal then says why)."""
    candidates = by_identity(administered(target, workers), policy)
    first = candidates[0]
    family = family_for(target, first)
    if family is None:
        raise FeatureAbsent(
            f"{first.label} speaks no known administration family (advertised: "
            f"{list(first.routes or ())}; expected pause_generation or control/pause_generation)"
        )
    same = tuple(
        worker
        for worker in candidates
        if family_for(target, worker) is family
        and (
            worker is first
            or policy is None
            or not policy.allowed
            or policy.permits(worker.instance_id)
        )
    )
    return Selection(same, family, target, policy.sample if policy is not None else WorkerSample())


def succeed(
    verdict: Verdict,
    admin: AdminClient,
    worker: AdminWorker,
    family: AdminFamily,
    route: str,
    body: Any = None,
) -> Any:
    """One administrative call that must succeed; returns the parsed reply."""
    return judged(verdict, family, route, worker, admin.call(worker, route, body))


def succeed_each(
    verdict: Verdict,
    admin: AdminClient,
    workers: Sequence[AdminWorker],
    family: AdminFamily,
    route: str,
    body: Any = None,
    deadline_s: float | None = None,
    on_answer: Callable[[AdminWorker], None] | None = None,
    judge: Judge | None = None,
) -> list[Any]:
    """One step that must succeed on every worker, sent to them all at once (bounded,
    `admin.FANOUT`) and judged in the workers' order (`on_answer`: see `call_each`; `judge`:
    `judged` unless given)."""
    exchanges = admin.call_each(workers, route, body, deadline_s=deadline_s, on_answer=on_answer)
    return [
        (judge or judged)(verdict, family, route, worker, exchange)
        for worker, exchange in zip(workers, exchanges, strict=True)
    ]


def _parsed(exchange: Exchange) -> Any:
    try:
        return exchange.json()
    except ValueError:
        return None


def judged(
    verdict: Verdict, family: AdminFamily, route: str, worker: AdminWorker, exchange: Exchange
) -> Any:
    parsed = _parsed(exchange)
    verdict.check(
        admin_checks.success_semantics(family.name, route, exchange.status, parsed, worker.label),
        exchange,
    )
    return parsed


def refusal_flagged(
    verdict: Verdict, family: AdminFamily, route: str, worker: AdminWorker, exchange: Exchange
) -> Any:
    """`judged`, except that an update the worker answers and refuses in its body is a release
    difference (`admin.update_taken_while_holding`): SGLang documents a cache flush after an
    `in_place` pause as unsuccessful, and 0.5.23 says so in the update's answer."""
    parsed = _parsed(exchange)
    flagged = verdict.check(
        admin_checks.update_taken_while_holding(
            family.name, route, exchange.status, parsed, worker.label
        ),
        exchange,
    )
    if verdict.differs(flagged):
        return parsed
    return judged(verdict, family, route, worker, exchange)


@dataclass(frozen=True)
class Routed:
    """The instances the frontend routed to before a pause (None: not observable there)."""

    instances: set[int] | None


@contextlib.contextmanager
def paused(
    verdict: Verdict,
    admin: AdminClient,
    selection: Selection,
    mode: str | None = None,
    on_answer: Callable[[AdminWorker], None] | None = None,
    body: dict[str, Any] | None = None,
    routed: Routed | None = None,
) -> Iterator[None]:
    """Pause every selected worker (checked), run the body, and always resume them all: a
    failing step never leaves a worker paused for the tests after it. A `wait` pause, or one
    whose `body` names no mode, may be answered only when the requests in flight have
    finished, so it is given as long as a stream is. `on_answer` is called with each worker as
    soon as its own pause answered; `body`, when given, is sent instead of the family's body
    for `mode`. The frontend's routing is read first, to await the workers' rejoining after
    the resume, unless `routed` was read before (a pause taken on streams in flight: behind a
    slow link the read takes as long as the link does, and the pause would land that late)."""
    family = selection.family
    if body is None:
        body = family.pause_body(mode)
    deadline = DRAIN_DEADLINE_S if body.get("mode", "wait") == "wait" else None
    if routed is None:
        routed = Routed(routed_now(admin, selection.target))
    try:
        succeed_each(
            verdict, admin, selection.workers, family, family.pause, body, deadline, on_answer
        )
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            admin.call_each(selection.workers, family.resume, {})
        raise
    succeed_each(verdict, admin, selection.workers, family, family.resume, {})
    await_rejoin(admin, selection.target, routed.instances, selection.pinned)


def routed_now(admin: AdminClient, target: Target | None) -> set[int] | None:
    """The instances the target's frontend routes to now (None: not observable there)."""
    if target is None:
        return None
    return routed_instances(admin.client, target, deadline_s=10.0)


def await_rejoin(
    admin: AdminClient,
    target: Target | None,
    before: set[int] | None,
    worker: AdminWorker | None = None,
) -> None:
    """Until the frontend routes again to as many instances as before the pause, and a
    one-token generation (pinned to `worker` when given) finds an instance ready (at most
    `REJOIN_S`): a worker that leaves routing while paused rejoins once its registration follows
    the resume, and a generation sent in between finds none (HTTP 503 "not ready"), which says
    nothing about the refresh. The frontend's `/health` may still list a worker its router has
    dropped, hence the generation. Where the routing is not observable (`before` None: Dynamo
    1.7's `/health` lists no instances), the generation alone is awaited. Past the bound the
    test goes on and judges what it sees."""
    if target is None or before == set():
        return
    if worker is not None and before is not None and worker.instance_id not in before:
        # an identity the frontend never routed to cannot rejoin: any ready instance will do
        worker = None
    ends = time.monotonic() + REJOIN_S
    while time.monotonic() < ends:
        now = None if before is None else routed_now(admin, target)
        # as many instances as before (a frontend routing to none lists none): by count, since
        # identities are the discovery rows' own checks, not this wait's
        if before is None or (now is not None and len(now) >= len(before)):
            probe = pinned_generation(
                admin.client, target, worker, READY_PROBE, max_tokens=1, deadline_s=REJOIN_S
            )
            if probe.status not in NOT_READY:
                return
        time.sleep(0.2)


LATE_PAUSE_RESUMES = 3
LATE_PAUSE_PROBE_S = 2.0


def resume_until_served(
    admin: AdminClient, target: Target, family: AdminFamily, workers: Sequence[AdminWorker]
) -> None:
    """Resume `workers` and make sure each serves again: a pause given up on at its deadline
    may still be applied after the resume that released it (its handler waited for one), and a
    worker left paused would fail every test after this one. Each is resumed again while a
    one-token generation pinned to it is not served within `LATE_PAUSE_PROBE_S` (at most
    `LATE_PAUSE_RESUMES` resumes). Cleanup only: nothing here is judged."""
    pending = list(workers)
    for _ in range(LATE_PAUSE_RESUMES):
        with contextlib.suppress(Exception):
            admin.call_each(pending, family.resume, {}, deadline_s=LATE_PAUSE_PROBE_S * 5)
        pending = [
            worker
            for worker in pending
            if pinned_generation(
                admin.client,
                target,
                worker,
                READY_PROBE,
                max_tokens=1,
                deadline_s=LATE_PAUSE_PROBE_S,
            ).status
            != 200
        ]
        if not pending:
            return


def require_update_routes(selection: Selection) -> None:
    """Not advertised, before anything is paused, when a worker cannot take an update."""
    for worker in selection.workers:
        missing = selection.family.missing_update_routes(worker)
        if missing:
            raise RouteNotAdvertised(update_unavailable(selection.family, worker, missing))


def update_all(
    verdict: Verdict,
    admin: AdminClient,
    selection: Selection,
    weights: WeightSource,
    policy: NewWeights | None = None,
    judge: Judge | None = None,
) -> str:
    """Apply one new named weight version (`policy`, else the source's next) to every selected
    worker (already paused): the family's update calls, after its once-per-worker setup (the
    sidecar's transfer engine); `judge` judges the update calls' answers."""
    family = selection.family
    require_update_routes(selection)
    policy = policy or weights.new(family, selection.workers)
    unset = [worker for worker in selection.workers if weights.needs_setup(worker)]
    for call in family.setup_calls(policy) if unset else ():
        succeed_each(verdict, admin, unset, family, call.route, dict(call.body))
    for worker in unset:
        weights.setup_done(worker)
    for call in family.update_calls(policy):
        succeed_each(
            verdict, admin, selection.workers, family, call.route, dict(call.body), judge=judge
        )
    weights.loaded(selection.workers, policy)
    return policy.version


def apply_update(
    verdict: Verdict,
    admin: AdminClient,
    selection: Selection,
    weights: WeightSource,
    policy: NewWeights | None = None,
) -> str:
    """Pause, apply a new named weight version (`policy`, else the source's next), resume;
    returns the version."""
    require_update_routes(selection)
    weights.require(selection.family)
    with paused(verdict, admin, selection):
        return update_all(verdict, admin, selection, weights, policy)
