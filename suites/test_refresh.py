"""Policy refresh: pause gates generation, updates are verified per worker, post-update
generation uses the new weights, KV state is invalidated, and the fleet reopens only then."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from rl_conformance import FeatureAbsent, MissingInput, Unobservable
from rl_conformance.checks import (
    aggregate_stream,
    control,
    pause_modes,
    straddle,
    streaming,
)
from rl_conformance.checks.base import MISSING
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import (
    Selection,
    apply_update,
    await_rejoin,
    instance_of,
    paused,
    require_update_routes,
    routed_now,
    select,
    succeed,
    update_all,
)
from rl_conformance.control.each_worker import label, on_worker, pins, require_observed
from rl_conformance.control.families import AdminFamily, family_for, new_version
from rl_conformance.control.inflight import (
    InFlightStream,
    first_token_s,
    in_flight_budget,
)
from rl_conformance.control.pause_probes import ended_native_crossing, held_generation, watch_s
from rl_conformance.control.policy_reference import ReferenceSource
from rl_conformance.control.refresh import (
    Coordinator,
    completion_ids,
    info_version,
    pinned_generation,
    reported_version,
)
from rl_conformance.control.weights import WeightSource
from rl_conformance.model.prompts import REFUSAL_STATUSES, PromptSpace, refused_prompt
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
PROMPT = [
    640,
    1024,
    777,
    1800,
    512,
    333,
    901,
    445,
    1203,
    377,
    1500,
    1234,
    999,
    888,
    777,
    666,
    555,
    444,
    333,
    1999,
]
CACHE_TOKENS = 2
"""What the cache prompt generates: its usage's `cached_tokens` is what is read."""
HELD_S = 0.6
HELD_TOKENS = 8
WAIT_TOKENS = 64
STREAMS = 3
REFITS = 3
"""Consecutive refits the version, served-policy and cache checks go through: what works on
the first refit only is a bug trainers hit on their second step."""
"""Streams held across one pause: each must end once, whatever the others do."""


def generate_ids(
    rl_verdict: Verdict, rl_client: Client, rl_target: Target, worker: AdminWorker | None
) -> tuple[list[int], Any]:
    exchange = pinned_generation(rl_client, rl_target, worker, PROMPT)
    rl_verdict.json(exchange)
    ids = completion_ids(exchange)
    if ids is None:
        raise FeatureAbsent("completion_token_ids unavailable on the pinned route")
    return ids, reported_version(exchange)


@capability("refresh.pause_gates")
def test_pause_holds_new_generation_until_resume(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """A generation sent to a paused worker delivers no token until resume: it is held, then
    completes, or it is refused (the native sidecar answers 503 while paused), and one sent
    after resume completes; on every selected worker, each by a generation pinned to it. The
    hold is sized from the worker's own pace, so a slow engine cannot pass by being slow."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    measured = first_token_s(
        rl_verdict, rl_client, rl_target, PROMPT, instance_of(chosen), HELD_TOKENS
    )
    held_s = watch_s(measured)
    for held in held_generation(rl_verdict, rl_client, rl_target, rl_admin, chosen, PROMPT, held_s):
        rl_verdict.check(
            on_worker(control.pause_gates(held.while_paused, held.completed, held_s), held.worker),
            held.exchange,
        )
    require_observed(chosen, "a generation sent to a paused worker")


def in_flight(
    rl_client: Client, rl_target: Target, chosen: Selection, max_tokens: int | None = None
) -> InFlightStream:
    """A stream pinned to the chosen worker, long enough to be in flight across a control step
    (`in_flight_budget`), unless `max_tokens` says otherwise."""
    budget = in_flight_budget(rl_client, rl_target, len(PROMPT))
    return InFlightStream(
        rl_client,
        rl_target,
        PROMPT,
        instance_id=instance_of(chosen),
        max_tokens=budget if max_tokens is None else min(max_tokens, budget),
    )


def ended_once(rl_verdict: Verdict, stream: InFlightStream) -> list[Any]:
    """The stream's events, after requiring one terminal per choice, terminal success, and a
    terminal true of what the stream returned (`InFlightStream.judge_terminal`)."""
    exchange = stream.exchange
    payloads = rl_verdict.events(exchange)
    rl_verdict.check(streaming.single_terminal(payloads), exchange)
    rl_verdict.check(
        streaming.terminal_success(
            exchange.state.value if exchange.state else "none", exchange.state_reason
        ),
        exchange,
    )
    stream.judge_terminal(rl_verdict)
    return payloads


@capability("refresh.pause_gates")
def test_pause_without_a_mode_follows_the_documented_default(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """A pause that names no mode, with a stream in flight: the Python worker keeps it in place
    until resume, the native sidecar aborts it (vLLM's default), SGLang aborts it. Clients that
    omit the mode depend on this; the two vLLM families differ. What the stream had delivered
    when the pause was sent and answered decides, never how fast it ran: a stream that ran to its
    end before the pause was answered leaves the test inconclusive (a pause that waited for it
    and one that arrived late look alike)."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    stream = in_flight(rl_client, rl_target, chosen)
    routed = routed_now(rl_admin, rl_target)
    sent = stream.start_and_wait_first_token(rl_verdict)
    try:
        rl_admin.call_each(chosen.workers, family.pause, {})
        answered = stream.mark()
        if not answered.ended:
            stream.wait(HELD_S)
        at_resume = stream.mark()
    finally:
        try:
            rl_admin.call_each(chosen.workers, family.resume, {})
        finally:
            stream.wait()
            await_rejoin(rl_admin, rl_target, routed, chosen.pinned)
    stream.judge_terminal(rl_verdict)
    evidence = (
        f"of {stream.max_tokens} tokens: {sent.describe()} when the pause was sent, "
        f"{answered.describe()} when it was answered, {at_resume.describe()} at resume, "
        f"{stream.mark().tokens} in all"
    )
    if answered.ended:
        if stream.completed():
            # A pause that waited for the stream and one that reached the worker only after the
            # stream's end look alike: which one it was depends on pace, so nothing is judged.
            raise Unobservable(
                f"the stream ran to its end before the pause was answered ({evidence})"
            )
        observed = "abort"
    elif at_resume.ended:
        if stream.completed() and stream.maybe_read_late(sent, answered, at_resume):
            raise Unobservable(
                "the stream ran to its end while paused, but what arrived then may have been "
                "generated before the pause took hold and read late: the pause call outlasted "
                f"that much of the stream, or it came faster than the stream ever ran ({evidence})"
            )
        observed = "none" if stream.completed() else "abort"
    else:
        observed = "keep" if stream.completed() else "abort"
    rl_verdict.check(
        control.pause_default_mode(family.name, family.default_pause_mode, observed, evidence),
        stream.exchange,
    )


def reported_versions(
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_client: Client,
    rl_target: Target,
    chosen: Selection,
) -> dict[str, Any]:
    """The weight version each selected worker reports: from the family's version route, else
    from an info route the deployment allowlists (named with the worker route), else from what a
    generation pinned to it names (`each_worker.pins`); none of them is an unobservable channel,
    and neither is a worker no generation can be pinned to."""
    family = chosen.family
    if family.version:
        return {
            worker.label: family.read_version(
                succeed(rl_verdict, rl_admin, worker, family, family.version, {})
            )
            for worker in chosen.workers
        }
    read = {worker.label: info_version(rl_admin, worker, family) for worker in chosen.workers}
    if read and all(found is not None for found in read.values()):
        return {
            f"{label} (/engine/{found[0]})": found[1]
            for label, found in read.items()
            if found is not None
        }
    reported = {}
    for worker in pins(chosen):
        _, seen = generate_ids(rl_verdict, rl_client, rl_target, worker)
        if seen is None:
            raise Unobservable(
                f"the weight version of {chosen.label}: the {family.name} family has no version "
                "route, "
                + (
                    "the worker serves none of "
                    f"{', '.join(f'/engine/{r}' for r in family.info_routes)} (not allowlisted), "
                    if family.info_routes
                    else ""
                )
                + "and responses carry no nvext.engine_data.weight_version"
            )
        reported[label(worker)] = seen
    require_observed(chosen, "the weight version each worker serves")
    return reported


@capability("refresh.version_verified")
def test_every_worker_reports_the_applied_version(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """Over `REFITS` consecutive updates, each new version is the one every worker reports:
    a version read-back that follows the first refit only is a stale read on the next."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    for _ in range(REFITS):
        version = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
        reported = reported_versions(rl_verdict, rl_admin, rl_client, rl_target, chosen)
        rl_verdict.measure(
            policy_update={
                "target_version": str(version),
                "workers_targeted": len(chosen.workers),
                "workers_verified": sum(value == version for value in reported.values()),
            }
        )
        rl_verdict.check(control.version_verified(version, reported))


@capability("refresh.version_verified")
def test_version_metadata_is_reported_back(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """The family's version-metadata route (`set_weight_version`, the sidecar's
    `update/update_weight_version`, SGLang's `control/update_weight_version`) names the weights
    without replacing them; every worker then reports that name."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    if family.set_version is None:
        raise FeatureAbsent(f"the {family.name} family has no version-metadata route to verify")
    version = new_version()
    call = family.set_version_call(version)
    assert call is not None
    for worker in chosen.workers:
        succeed(rl_verdict, rl_admin, worker, family, call.route, dict(call.body))
    reported = reported_versions(rl_verdict, rl_admin, rl_client, rl_target, chosen)
    rl_verdict.check(control.version_verified(version, reported))


@capability("refresh.post_update_generation")
def test_post_update_generation_uses_the_new_weights(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """Where the run does not know which checkpoint the worker held (a deployment reached by
    URL, left as an earlier run left it), an unchanged output may mean it already held the one
    sent: a second update, to a checkpoint it now surely does not hold, decides. Judged on every
    selected worker, each by generations pinned to it."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    workers = pins(chosen)
    unknown = None in rl_weights.holding(chosen.workers)
    before = [generate_ids(rl_verdict, rl_client, rl_target, w)[0] for w in workers]
    version = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
    after = [generate_ids(rl_verdict, rl_client, rl_target, w) for w in workers]
    if unknown and any(ids == old for (ids, _), old in zip(after, before, strict=True)):
        before = [ids for ids, _ in after]
        version = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
        after = [generate_ids(rl_verdict, rl_client, rl_target, w) for w in workers]
    for worker, old, (ids, seen) in zip(workers, before, after, strict=True):
        rl_verdict.check(on_worker(control.post_update_generation(old, ids, seen, version), worker))
    require_observed(chosen, "what a worker generates after an update")


PROBE_TOKENS = 16


def served_probe(
    rl_verdict: Verdict, rl_client: Client, rl_target: Target, worker: AdminWorker | None
) -> tuple[list[int], list[float] | None, list[float | None] | None]:
    """The served greedy ids, their log probabilities and the prompt tokens' log probabilities
    (None where the response carries none) of the fixed probe, pinned to `worker`."""
    exchange = pinned_generation(
        rl_client,
        rl_target,
        worker,
        PROMPT,
        max_tokens=PROBE_TOKENS,
        logprobs=0,
        prompt_logprobs=0,
        extra_fields=("completion_token_ids", "prompt_logprobs"),
    )
    body = rl_verdict.json(exchange)
    ids = completion_ids(exchange)
    if ids is None:
        raise FeatureAbsent("completion_token_ids unavailable on the pinned route")
    selected = ((body.get("choices") or [{}])[0].get("logprobs") or {}).get("token_logprobs")
    listed = (body.get("nvext") or {}).get("prompt_logprobs")
    prompt: list[float | None] | None = None
    if isinstance(listed, list) and len(listed) == len(PROMPT):
        prompt = [
            None if not isinstance(entry, dict) else (entry.get(str(token)) or {}).get("logprob")
            for entry, token in zip(listed, PROMPT, strict=True)
        ]
    return ids, selected if isinstance(selected, list) else None, prompt


@capability("refresh.served_policy_verified")
def test_the_served_policy_is_the_checkpoint_sent(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
    rl_references: ReferenceSource,
) -> None:
    """After each of `REFITS` consecutive updates from checkpoints on disk (alternating between
    the given ones), the worker serves the checkpoint just sent: the greedy ids and the log
    probabilities of a fixed probe match what the checkpoint itself gives (computed from it
    with transformers), within `control.SERVED_POLICY_TOLERANCE`. An update that answers
    success and keeps part of the old weights changes the output, so
    `refresh.post_update_generation` passes; this does not."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    require_update_routes(chosen)
    rl_weights.require(chosen.family)
    if chosen.family.update_kind != "disk":
        raise Unobservable(
            f"the served policy of a {chosen.family.name} worker: its updates are transfers, "
            "which name no checkpoint directory to compute a reference from"
        )
    for _ in range(REFITS):
        policy = rl_weights.new(chosen.family, chosen.workers)
        if policy.model_path is None:
            raise MissingInput(
                "the served policy needs a real checkpoint to compare with: give "
                "--update-model-path PATH twice"
            )
        reference = rl_references.reference(policy.model_path, PROMPT, PROBE_TOKENS)
        apply_update(rl_verdict, rl_admin, chosen, rl_weights, policy)
        for worker in pins(chosen):
            ids, selected, prompt = served_probe(rl_verdict, rl_client, rl_target, worker)
            rl_verdict.check(
                on_worker(control.served_policy(ids, selected, prompt, reference), worker)
            )
    require_observed(chosen, "the policy a worker serves")


def cached_tokens(
    rl_verdict: Verdict, rl_client: Client, rl_target: Target, worker: AdminWorker
) -> int:
    """The cached prefix the cache prompt reports: a prompt long enough to fill whole KV blocks
    of every common size (16 to 256 tokens; a CPU vLLM's smallest is 32), of ids the deployment
    takes and within its context window (`PromptSpace.cache_prompt`), since a prompt shorter
    than one block is never cached and its flush would show nothing."""
    prompt = PromptSpace.of(rl_target.topology).cache_prompt(CACHE_TOKENS)
    exchange = pinned_generation(rl_client, rl_target, worker, prompt, max_tokens=CACHE_TOKENS)
    if exchange.status in REFUSAL_STATUSES:
        short = pinned_generation(rl_client, rl_target, worker, PROMPT, max_tokens=CACHE_TOKENS)
        what = f"the {len(prompt)}-token cache prompt"
        refused_prompt(exchange.status, exchange.body_preview(), what, short.status)
    body = rl_verdict.json(exchange)
    cached = ((body.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
    if not isinstance(cached, int):
        raise Unobservable(
            "prefix-cache reuse: responses carry no usage.prompt_tokens_details.cached_tokens"
        )
    return cached


@capability("refresh.kv_invalidation")
def test_flush_invalidates_cached_prefixes(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """Cached prefixes of one worker are not reused after its cache is invalidated: by the
    family's flush route (Python worker), by a pause with `clear_cache` (native sidecar), or
    (SGLang, whose cache reset is a request-plane endpoint) by the weight update itself, which
    flushes by default (`flush_cache` in SGLang's update requests). `REFITS` times over: a
    cache reset that works on the first refit only (NeMo RL #4018) fails the second. Each
    selected worker's cache is read by generations pinned to it."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    workers = [worker for worker in pins(chosen) if worker is not None]
    if not workers:
        raise Unobservable(
            f"one worker's prefix cache: generations cannot be pinned to {chosen.label} "
            "(its system server's /metrics names no worker_id)"
        )
    family = chosen.family
    for worker in workers:  # what each refit's last read leaves cached warms the next one
        cached_tokens(rl_verdict, rl_client, rl_target, worker)
    for _ in range(REFITS):
        before = {}
        for worker in workers:
            before[worker] = cached_tokens(rl_verdict, rl_client, rl_target, worker)
            if before[worker] <= 0:
                raise Unobservable(
                    f"prefix-cache reuse on {worker.label}: a repeated prompt reported "
                    "cached_tokens 0 (prefix caching off?), so its invalidation cannot be observed"
                )
        if family.flush:
            for worker in chosen.workers:
                succeed(rl_verdict, rl_admin, worker, family, family.flush, {})
        elif family.clears_on_pause:
            with paused(rl_verdict, rl_admin, chosen):
                pass
        else:
            apply_update(rl_verdict, rl_admin, chosen, rl_weights)
        for worker in workers:
            after = cached_tokens(rl_verdict, rl_client, rl_target, worker)
            rl_verdict.check(on_worker(control.kv_invalidation(before[worker], after), worker))
    require_observed(chosen, "a worker's prefix cache")


class RefreshLifecycle(RuleBasedStateMachine):
    """Random orders of the lifecycle's steps against the live fleet. Invariants: nothing is
    admitted while gated; the fleet never reopens after a failed step; and every deployment step
    that the spec makes checkable (update, version, post-update generation) is checked."""

    context: dict[str, Any] = {}

    def __init__(self) -> None:
        super().__init__()
        context = type(self).context
        self.client: Client = context["client"]
        self.target: Target = context["target"]
        self.verdict: Verdict = context["verdict"]
        self.admin: AdminClient = context["admin"]
        self.family: AdminFamily = context["family"]
        self.weights: WeightSource = context["weights"]
        self.coordinator = Coordinator(self.admin, self.family, list(context["workers"]))
        self.paused = False
        self.routed_before: set[int] | None = None
        self.applied: str | None = None
        self.verified = False
        self.generated = False
        self.baseline: dict[str, list[int]] = {}
        self.baseline_paths: set[str | None] = set()
        self.unknown_before: set[str] = set()

    @initialize()
    def one_complete_refresh(self) -> None:
        """Every example starts with the canonical order, so each run exercises the whole path;
        the rules then explore other orders."""
        self.gate()
        self.pause()
        self.update()
        if self.family.flush is not None:
            self.flush()
        if self.family.version is not None:
            self.verify()
        self.resume_engines()
        self.post_update_generation()
        self.reopen()

    @rule()
    def gate(self) -> None:
        self.coordinator.gate()
        self.applied, self.verified, self.generated = None, False, False

    @rule()
    def rollout_asks_admission(self) -> None:
        if self.coordinator.admit() and self.coordinator.gated:
            self.coordinator.admitted_while_gated += 1

    @precondition(lambda self: self.coordinator.gated and not self.paused)
    @rule()
    def pause(self) -> None:
        if self.applied is None:  # the baseline is what served before this refresh's update
            for worker in self.coordinator.workers:
                ids, _ = generate_ids(self.verdict, self.client, self.target, worker)
                self.baseline[worker.label] = ids
            self.baseline_paths = self.weights.holding(self.coordinator.workers)
            self.unknown_before = {
                worker.label
                for worker in self.coordinator.workers
                if None in self.weights.holding([worker])
            }
        self.paused = True  # whatever the replies say, teardown must resume
        self.routed_before = routed_now(self.admin, self.target)
        for step in self.coordinator.call_all("pause", self.family.pause, self.family.pause_body()):
            self.verdict.check(step.result, step.exchange)

    @precondition(lambda self: self.paused)
    @rule()
    def update(self) -> None:
        weights = self.weights.new(self.family, self.coordinator.workers, self.baseline_paths)
        for worker in self.coordinator.workers:
            calls = self.family.update_calls(weights)
            if self.weights.needs_setup(worker):
                calls = self.family.setup_calls(weights) + calls
                self.weights.setup_done(worker)
            for call in calls:
                step = self.coordinator.call_one("update", worker, call.route, dict(call.body))
                self.verdict.check(step.result, step.exchange)
            self.weights.loaded([worker], weights)
        self.applied, self.verified, self.generated = weights.version, False, False

    @precondition(lambda self: self.paused and self.family.flush is not None)
    @rule()
    def flush(self) -> None:
        assert self.family.flush is not None
        for step in self.coordinator.call_all("flush", self.family.flush, {}):
            self.verdict.check(step.result, step.exchange)

    @precondition(lambda self: self.applied is not None and self.family.version is not None)
    @rule()
    def verify(self) -> None:
        assert self.family.version is not None
        reported = {}
        for step in self.coordinator.call_all("verify", self.family.version, {}):
            try:
                reported[step.worker] = self.family.read_version(step.exchange.json())  # type: ignore[union-attr]
            except (ValueError, AttributeError):
                reported[step.worker] = None
        result = control.version_verified(self.applied, reported)
        if not result.passed:
            self.coordinator.failures.append("version verification failed")
        self.verdict.check(result)
        self.verified = True

    @precondition(lambda self: self.paused)
    @rule()
    def resume_engines(self) -> None:
        self.paused = False
        for step in self.coordinator.call_all("resume", self.family.resume, {}):
            self.verdict.check(step.result, step.exchange)
        await_rejoin(self.admin, self.target, self.routed_before, self.coordinator.workers[0])

    @precondition(lambda self: not self.paused and self.applied is not None)
    @rule()
    def post_update_generation(self) -> None:
        for worker in self.coordinator.workers:
            after, seen = generate_ids(self.verdict, self.client, self.target, worker)
            if after == self.baseline.get(worker.label) and worker.label in self.unknown_before:
                # It may have held the checkpoint sent: the run did not know what it held
                # (later examples, which know, judge it).
                continue
            result = control.post_update_generation(
                self.baseline.get(worker.label, []), after, seen, self.applied
            )
            if not result.passed:
                self.coordinator.failures.append(f"post-update generation on {worker.label}")
            self.verdict.check(result)
        self.generated = True

    @precondition(lambda self: self.coordinator.gated and not self.paused)
    @rule()
    def reopen(self) -> None:
        ready = self.applied is None or (
            self.generated and (self.verified or self.family.version is None)
        )
        if not ready:
            self.coordinator.failures.append("reopen attempted before verification")
        reopened = self.coordinator.reopen()
        assert not (reopened and self.coordinator.failures), "reopened despite a failed step"
        self.coordinator.failures = []

    @invariant()
    def nothing_admitted_while_gated(self) -> None:
        assert self.coordinator.admitted_while_gated == 0

    def teardown(self) -> None:
        if self.paused:
            for worker in self.coordinator.workers:
                try:
                    self.admin.call(worker, self.family.resume, {})
                except Exception:
                    continue
            await_rejoin(self.admin, self.target, self.routed_before, self.coordinator.workers[0])


@capability("refresh.lifecycle")
def test_refresh_lifecycle_state_machine(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    require_update_routes(chosen)
    rl_weights.require(chosen.family)
    family = chosen.family
    workers = [w for w in rl_admin_workers if family_for(rl_target, w) is family]
    RefreshLifecycle.context = {
        "client": rl_client,
        "target": rl_target,
        "verdict": rl_verdict,
        "admin": rl_admin,
        "family": family,
        "workers": workers,
        "weights": rl_weights,
    }
    machine = RefreshLifecycle.TestCase
    machine.settings = settings(
        settings.default,
        max_examples=max(2, settings.default.max_examples // 2),
        stateful_step_count=8,
        deadline=None,
        database=None,
    )
    machine().runTest()


@capability("refresh.inflight_terminal")
def test_a_stream_in_flight_across_a_version_rename_ends_once_and_says_if_cut(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """The version-metadata route names the weights without replacing them; SGLang's
    `update_weight_version` also aborts in-flight requests unless told otherwise
    (`abort_all_requests` defaults to true). A stream open across it ends exactly once, and one
    it cut short says `cancelled` (Dynamo reports the abort as finish `stop`)."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    call = family.set_version_call(new_version())
    if call is None:
        raise FeatureAbsent(f"the {family.name} family has no version-metadata route")
    stream = in_flight(rl_client, rl_target, chosen)
    sent = stream.start_and_wait_first_token(rl_verdict)
    try:
        for worker in chosen.workers:
            succeed(rl_verdict, rl_admin, worker, family, call.route, dict(call.body))
    finally:
        stream.wait()
    if sent.ended:
        raise Unobservable(f"the stream had ended ({sent.describe()}) when the rename was sent")
    ended_once(rl_verdict, stream)


IN_PLACE_MODES = ("keep", "in_place")
"""Pause modes that hold requests where they are, to continue under the weights loaded meanwhile."""


@capability("refresh.straddle_reported")
def test_a_sample_held_across_an_update_names_the_versions_of_its_tokens(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """A native SGLang stream is paused in place, its worker updated to a new version, and
    resumed: the tokens before the update are the old policy's, the rest may be the new one's. The
    versions each event and span names must be true of that (`checks.straddle`); whether the
    straddle was shown is measured, since where the new version begins depends on the engine's
    pace."""
    if rl_target.backend != "sglang":
        raise FeatureAbsent(
            f"{rl_target.backend} names no weight version per token: vLLM before 0.34 "
            "(`return_weight_versions`) and TensorRT-LLM have no such field, and Dynamo sends "
            "nvext.engine_data on the finish chunk only"
        )
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    mode = next((m for m in family.pause_modes if m in IN_PLACE_MODES), None)
    if mode is None:
        raise FeatureAbsent(f"the {family.name} family has no pause that keeps requests in place")
    old_version = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
    budget = in_flight_budget(rl_client, rl_target, len(PROMPT))
    stream = InFlightStream(
        rl_client,
        rl_target,
        PROMPT,
        instance_id=instance_of(chosen),
        max_tokens=budget,
        native=True,
    )
    try:
        sent = stream.start_and_wait_first_token()
    except Unobservable:
        stream.wait()
        refused = stream.result.get("exchange")
        if refused is not None and refused.status in {404, 405, 501}:
            raise Unobservable(
                f"POST /generate answered HTTP {refused.status}: SGLang's native stream, the "
                "channel that names a version per output, is not served"
            ) from None
        raise
    try:
        with paused(rl_verdict, rl_admin, chosen, mode):
            before = stream.mark()
            version = update_all(rl_verdict, rl_admin, chosen, rl_weights)
    finally:
        stream.wait()
    exchange = stream.exchange
    events = rl_verdict.events(exchange, schema="sglang-generate-chunk")
    if before.ended:
        # Ended before the update: run to its end, it did not cross it; cut short, the pause
        # that holds requests in place ended it.
        ended = ended_native_crossing(mode, stream.max_tokens, sent.tokens, before.tokens, events)
        why = pause_modes.unjudged(ended)
        if why is not None:
            raise Unobservable(f"{why}: it did not cross the update")
        rl_verdict.check(pause_modes.pause_mode_effect(ended), exchange)
    rl_verdict.check(
        streaming.terminal_success(
            exchange.state.value if exchange.state else "none", exchange.state_reason
        ),
        exchange,
    )
    trail = straddle.trail_from_native_events(events, before.tokens)
    if not trail.names_versions:
        raise FeatureAbsent(
            "no event of SGLang's /generate stream carries meta_info.weight_version or "
            "meta_info.weight_versions"
        )
    named = trail.versions_named()
    rl_verdict.measure(
        sample_versions={
            "versions": [str(v) for v in named],
            "straddle_shown": len(named) > 1,
            "tokens": trail.tokens,
            "tokens_read_before_update": trail.known_old,
            "spans": trail.spans is not MISSING,
        }
    )
    rl_verdict.check(straddle.straddle_reported(trail, old_version, version), exchange)


@capability("refresh.inflight_terminal")
@pytest.mark.parametrize("mode_index", [0, 1, 2])
def test_streams_in_flight_across_a_refresh_end_in_one_terminal_state(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
    mode_index: int,
) -> None:
    """`STREAMS` streams open while their worker is paused (each mode) and updated each end
    exactly once: completed, or aborted and saying so, or resumed; none hangs, none ends twice
    (an abort pause once left streams with no terminal: vllm-project/tpu-inference #3362).
    Where the deployment names the weights, they are the old or the new version, nothing
    else."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    modes = family.pause_modes
    if mode_index >= len(modes):
        pytest.skip(f"{family.name} has {len(modes)} pause modes")
    mode = modes[mode_index]
    old_version = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
    # a `wait` pause lasts until the streams end: short ones still cross the pause
    streams = [
        in_flight(rl_client, rl_target, chosen, WAIT_TOKENS if mode == "wait" else None)
        for _ in range(STREAMS)
    ]
    try:
        sent = [stream.start_and_wait_first_token(rl_verdict) for stream in streams]
        with paused(rl_verdict, rl_admin, chosen, mode):
            answered = [stream.mark() for stream in streams]
            version = update_all(rl_verdict, rl_admin, chosen, rl_weights)
    finally:
        for stream in streams:
            stream.wait()
    crossed = [
        stream
        for stream, before, at_pause in zip(streams, sent, answered, strict=True)
        if not before.ended
        and not (at_pause.ended and at_pause.tokens >= stream.max_tokens and mode != "wait")
    ]
    if not crossed:
        raise Unobservable(
            f"every stream had run to its end ({', '.join(a.describe() for a in answered)} of "
            f"{streams[0].max_tokens}) when the {mode!r} pause was answered: none crossed the "
            "refresh"
        )
    for stream in crossed:
        exchange = stream.exchange
        # Cut short by an abort, it says so: a trainer must tell a truncated sample from a
        # finished one.
        merged = aggregate_stream(ended_once(rl_verdict, stream))
        reported = (merged.get("nvext") or {}).get("engine_data", {}).get("weight_version")
        rl_verdict.check(control.version_is_one_of(reported, [old_version, version]), exchange)
