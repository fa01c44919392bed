"""The certification scenarios: a fleet, the events injected into it, and the steps a trainer
drives through the adapter. Each scenario names whether its refreshes can succeed: a refresh
that meets a membership change, a failed update, flush or post-update generation, a missing
route or a discovery `error` must leave generation gated ("Keep generation gated when membership
changes, an update fails, cache reset fails, or post-update generation does not pass")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..contract import adapter
from ..contract.kinds import ChecklistItem
from .fleet_events import (
    HELD_TIMEOUT_S,
    DiscoveryEntryError,
    FinishUnrecognised,
    FirstGenerationBadGateway,
    FirstGenerationHeld,
    FirstGenerationSlow,
    FirstGenerationUnavailable,
    FirstStreamCut,
    FlushFails,
    IdsMissing,
    LogprobsUnusable,
    PacedStreams,
    PartialWorkerSet,
    PostUpdateGenerationFails,
    ProtocolVersionTwo,
    ReorderedListings,
    RouteMissingOnOneWorker,
    StopStringFinish,
    UpdateFailsOnOneWorker,
    WorkerJoinsAfterPause,
    WorkerLeavesAfterPause,
)
from .fleets import CertificationFleet
from .injection import Injection
from .protocol import GENERATION, REFRESH

PROMPT = (101, 102, 103, 104, 105)
OBSERVATION = (106, 107)
"""What the environment answers between two turns of a trajectory, appended to the next turn's
prompt after the ids the turn before generated."""
MAX_TOKENS = 6
REQUEST_TIMEOUT_S = 10.0
"""The adapter's deadline for one attempt where the scenario stages no timeout: generous, so
that a reply slowed by a loaded machine is not taken for a lost attempt (a twin that retries
without identity would fail a scenario that never staged a retry)."""
ACROSS_REFRESH_TIMEOUT_S = 20.0
"""The adapter's deadline for a rollout a whole refresh (pause, update, resume) lands in."""
UNARY_LEAD_TOKENS = 2
"""A unary rollout shows no token before its end: the refresh it is to straddle begins once it
has been at the slowed engine this many token times."""


@dataclass(frozen=True)
class Generate:
    slot: str
    cancel_after_events: int | None = None
    """Cancel the rollout once this many events reached the client; a unary rollout, which
    receives no events, once the proxy holds its reply."""
    trajectory: str | None = None
    """The multi-turn trajectory this rollout is a turn of: the turns of one trajectory are
    driven in order, each prompt extending the one before."""


@dataclass(frozen=True)
class Refresh:
    version: str
    checkpoint: str
    """The name of the policy's checkpoint directory, made by the kit under a temporary
    directory of its own."""
    step: int = 0


@dataclass(frozen=True)
class GenerateAcross:
    """A rollout still streaming when the trainer refreshes the policy, as an asynchronous
    trainer overlaps them: `refresh` starts once the rollout's first event arrived."""

    slot: str
    refresh: Refresh


Step = Generate | Refresh | GenerateAcross


def _refresh(n: int) -> Refresh:
    return Refresh(version=f"policy-v{n}", checkpoint=f"policy-v{n}", step=n)


@dataclass
class Scenario:
    name: str
    title: str
    steps: tuple[Step, ...]
    workers: int = 2
    expected_workers: int = 2
    refresh_succeeds: bool | None = True
    """True: every refresh can and must complete; False: none can, generation must stay gated;
    None: completing on the whole fleet and failing closed are both safe."""
    recovers: bool = False
    """The first refresh cannot succeed and the trainer retries it. The retry may complete and
    reopen the fleet, or fail closed (a client that holds its state indeterminate after a failed
    update until an operator acts keeps the recovery rule: the fleet stays gated); what it may
    not do is report success and keep generation gated, or reopen without a verified
    refresh."""
    injection: type[Injection] = Injection
    request_timeout_s: float = REQUEST_TIMEOUT_S
    notes: str = ""
    staged_for: tuple[ChecklistItem, ...] = ()
    """The checklist items this scenario's event exists to test: where the event did not happen
    (no reply was cut, rewritten or cancelled in flight), they cannot pass on it."""
    extra: dict[str, Any] = field(default_factory=dict)

    def applies_to(self, implements: frozenset[str]) -> str | None:
        """Why this scenario cannot judge an adapter that implements only `implements` (it
        drives rollouts only, and the adapter generates nothing), or None when it can."""
        if GENERATION not in implements and not self.refreshes():
            return (
                f"it drives rollouts only, and the adapter implements "
                f"{' and '.join(sorted(implements & {GENERATION, REFRESH}))} only"
            )
        return None

    def expects(self, position: int) -> bool | None:
        """Whether the refresh at this position (0 = the first the trainer takes) can and must
        complete (True), cannot (False), or may fail closed (None)."""
        if self.recovers:
            return None if position > 0 else False
        return self.refresh_succeeds

    def unsupported(
        self,
        fleet: CertificationFleet,
        implements: frozenset[str] = frozenset({GENERATION, REFRESH}),
    ) -> str | None:
        """Why this scenario cannot run on `fleet` for an adapter that implements `implements`,
        or None when it can."""
        return self.unsupported_given(self.injection.unsupported(fleet), implements)

    def unsupported_given(self, unstageable: str | None, implements: frozenset[str]) -> str | None:
        """`unsupported`, told why the fleet cannot stage the scenario's events (`unstageable`,
        None when it can): the runner asks the fleet once and the adapter's halves twice, before
        and after it is built. Events only a refresh meets (discovery changed, a flush failed)
        that the fleet cannot stage keep the scenario from an adapter that refreshes; one that
        only generates still runs its rollouts, which need no control."""
        if (
            unstageable is not None
            and REFRESH not in implements
            and self.injection.reaches_control_only()
        ):
            return None
        return unstageable

    def refreshes(self) -> list[Refresh]:
        """Every refresh the trainer takes, overlapped with a rollout or not, in order."""
        return [
            step.refresh if isinstance(step, GenerateAcross) else step
            for step in self.steps
            if isinstance(step, Refresh | GenerateAcross)
        ]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "iteration",
        "one complete iteration: rollouts, policy refresh, post-update rollouts",
        (Generate("s1"), Generate("s2"), _refresh(1), Generate("s3")),
    ),
    Scenario(
        "two_iterations",
        "two refreshes in a row, each re-reading the fleet (listed in a new order each time)",
        (Generate("s1"), _refresh(1), Generate("s2"), _refresh(2), Generate("s3")),
        injection=ReorderedListings,
    ),
    Scenario(
        "refresh_during_rollout",
        "a rollout is still streaming when the trainer refreshes the policy: its tokens come "
        "from two policies",
        (GenerateAcross("s1", _refresh(1)), Generate("s2")),
        injection=FirstGenerationSlow,
        request_timeout_s=ACROSS_REFRESH_TIMEOUT_S,
        notes="a pause that keeps requests in place (the vLLM Python worker's default) holds "
        "the rollout and continues it under the new weights; one that drains or aborts it "
        "leaves nothing to judge",
    ),
    Scenario(
        "late_completion",
        "the first attempt completes after the adapter's deadline",
        (Generate("s1"), Generate("s2")),
        injection=FirstGenerationHeld,
        request_timeout_s=HELD_TIMEOUT_S,
    ),
    Scenario(
        "stream_cut",
        "the first reply is cut short: a stream after two events, without [DONE]; a unary "
        "reply mid-body",
        (Generate("s1"), Generate("s2")),
        injection=FirstStreamCut,
        staged_for=(adapter.VERIFIED_TERMINAL_ONLY,),
    ),
    Scenario(
        "cancellation",
        "the trainer cancels a rollout in flight: mid-stream, or while its unary reply is held",
        (Generate("s1", cancel_after_events=2), Generate("s2")),
        injection=PacedStreams,
        staged_for=(adapter.VERIFIED_TERMINAL_ONLY,),
    ),
    Scenario(
        "unavailable_while_paused",
        "the first attempt is answered 503 as a paused worker's model is",
        (Generate("s1"),),
        injection=FirstGenerationUnavailable,
    ),
    Scenario(
        "bad_gateway",
        "an ingress answers the first attempt 502 with an HTML page, not JSON",
        (Generate("s1"), Generate("s2")),
        injection=FirstGenerationBadGateway,
        notes="a retry must carry an identity of its own; giving the slot up is safe too",
    ),
    Scenario(
        "ids_missing",
        "the first reply carries no generated token id in any field, only the text",
        (Generate("s1"), Generate("s2")),
        injection=IdsMissing,
        staged_for=(adapter.ENGINE_TOKEN_IDS,),
        notes="the text encoded again is not the engine's sequence: nothing may be admitted "
        "from that reply",
    ),
    Scenario(
        "logprobs_unusable",
        "the first reply's selected logprobs are all null, the second's one fewer than its tokens",
        (Generate("s1"), Generate("s2"), Generate("s3")),
        injection=LogprobsUnusable,
        staged_for=(adapter.LOGPROB_ALIGNMENT,),
        notes="a sample whose logprobs are not the engine's, one per token, cannot be verified; "
        "filling them in (0.0) or cutting the ids to fit is admitting what was not returned",
    ),
    Scenario(
        "finish_unrecognised",
        'a 200 whose finish_reason is null, then one whose finish_reason is "error"',
        (Generate("s1"), Generate("s2"), Generate("s3")),
        injection=FinishUnrecognised,
        staged_for=(adapter.VERIFIED_TERMINAL_ONLY,),
    ),
    Scenario(
        "stop_string_finish",
        "every reply ends on a stop string, as the Dynamo 1.6.1 frontend sends it: the raw "
        "engine payload (nvext.engine_data) dropped, the named completion_token_ids kept",
        (Generate("s1"), Generate("s2")),
        injection=StopStringFinish,
        staged_for=(adapter.ENGINE_TOKEN_IDS, adapter.GENERATION_REACHES_BACKEND),
        notes="a legal reply, staged whatever stop strings the request named: what is judged "
        "is which fields the client takes the engine's ids from",
    ),
    Scenario(
        "multi_turn",
        "a two-turn trajectory: the second turn's prompt holds the first's prompt, its "
        "generated ids and the environment's reply",
        (Generate("t1", trajectory="episode-1"), Generate("t2", trajectory="episode-1")),
        notes="each turn is a generation of its own: a late completion of the first turn must "
        "be told from the second",
    ),
    Scenario(
        "worker_joins",
        "a worker registers between discovery and update",
        (Generate("s1"), _refresh(1), Generate("s2")),
        workers=3,
        refresh_succeeds=False,
        injection=WorkerJoinsAfterPause,
    ),
    Scenario(
        "worker_leaves",
        "a worker leaves between discovery and update",
        (Generate("s1"), _refresh(1), Generate("s2")),
        refresh_succeeds=False,
        injection=WorkerLeavesAfterPause,
    ),
    Scenario(
        "update_fails_on_one_worker",
        "the weight update fails on one worker",
        (Generate("s1"), _refresh(1), Generate("s2")),
        refresh_succeeds=False,
        injection=UpdateFailsOnOneWorker,
    ),
    Scenario(
        "refresh_retried",
        "the weight update fails on one worker; the trainer retries the refresh, which succeeds",
        (Generate("s1"), _refresh(1), _refresh(1), Generate("s2")),
        recovers=True,
        injection=UpdateFailsOnOneWorker,
        notes="the first refresh must fail closed and keep generation gated; the retry may "
        "complete (every worker updated and verified, the fleet reopened, s2 generated) or fail "
        "closed",
    ),
    Scenario(
        "flush_fails",
        "the cache flush fails on one worker",
        (Generate("s1"), _refresh(1), Generate("s2")),
        refresh_succeeds=False,
        injection=FlushFails,
    ),
    Scenario(
        "post_update_generation_fails",
        "generation fails after the update",
        (Generate("s1"), _refresh(1), Generate("s2")),
        refresh_succeeds=False,
        injection=PostUpdateGenerationFails,
    ),
    Scenario(
        "route_missing_on_one_worker",
        "one worker does not advertise the route that applies a policy",
        (Generate("s1"), _refresh(1), Generate("s2")),
        refresh_succeeds=False,
        injection=RouteMissingOnOneWorker,
    ),
    Scenario(
        "discovery_entry_error",
        "discovery lists one worker with a probe error",
        (Generate("s1"), _refresh(1), Generate("s2")),
        refresh_succeeds=False,
        injection=DiscoveryEntryError,
    ),
    Scenario(
        "discovery_protocol_v2",
        "discovery answers in protocol version 2 when the refresh begins",
        (Generate("s1"), _refresh(1), Generate("s2")),
        refresh_succeeds=False,
        injection=ProtocolVersionTwo,
        notes="a client that speaks protocol version 1 cannot know what a version 2 body means: "
        "it must not act on it, and keeps generation gated",
    ),
    Scenario(
        "partial_worker_set",
        "one worker is still registering when the refresh begins",
        (Generate("s1"), _refresh(1), Generate("s2")),
        refresh_succeeds=None,
        injection=PartialWorkerSet,
    ),
)


def scenario(name: str) -> Scenario:
    for candidate in SCENARIOS:
        if candidate.name == name:
            return candidate
    raise KeyError(name)
