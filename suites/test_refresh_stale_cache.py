"""Policy refresh, the KV cache: prefixes cached before a refresh are not reused after the cache
is invalidated, over consecutive refits, and a cache reset taken while requests are retracted
(SGLang's `retract` pause) that answers success invalidates them."""

from __future__ import annotations

import pytest

from rl_conformance import FeatureAbsent, Unobservable, contract
from rl_conformance.checks import control, held_requests, streaming
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import apply_update, paused, select, succeed_each
from rl_conformance.control.each_worker import at_once, on_worker, pins, require_observed
from rl_conformance.control.refresh import pinned_generation
from rl_conformance.control.refresh_probes import PROMPT, REFITS, in_flight
from rl_conformance.control.weights import WeightSource
from rl_conformance.model.prompts import REFUSAL_STATUSES, PromptSpace, refused_prompt
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict
from rl_conformance.wire.exchange import Exchange

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
CACHE_TOKENS = 2
"""What the cache prompt generates: its usage's `cached_tokens` is what is read."""


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


@capability(contract.refresh.KV_INVALIDATION)
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

    def cached(worker: AdminWorker) -> int:
        return cached_tokens(rl_verdict, rl_client, rl_target, worker)

    at_once(cached, workers)  # what each refit's last read leaves cached warms the next one
    for _ in range(REFITS):
        before = dict(zip(workers, at_once(cached, workers), strict=True))
        for worker in workers:
            if before[worker] <= 0:
                raise Unobservable(
                    f"prefix-cache reuse on {worker.label}: a repeated prompt reported "
                    "cached_tokens 0 (prefix caching off?), so its invalidation cannot be observed"
                )
        if family.flush:
            succeed_each(rl_verdict, rl_admin, chosen.workers, family, family.flush, {})
        elif family.clears_on_pause:
            with paused(rl_verdict, rl_admin, chosen):
                pass
        else:
            apply_update(rl_verdict, rl_admin, chosen, rl_weights)
        for worker, after in zip(workers, at_once(cached, workers), strict=True):
            rl_verdict.check(on_worker(control.kv_invalidation(before[worker], after), worker))
    require_observed(chosen, "a worker's prefix cache", rl_verdict)


NOT_SERVED = frozenset({404, 405, 501})
RETRACT = "retract"


@capability(contract.refresh.KV_INVALIDATION)
def test_a_flush_after_a_retract_pause_that_answers_success_invalidates(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
) -> None:
    """A `retract` pause returns the running requests to the waiting queue, and "the KV cache
    can be flushed in this mode and will be automatically recomputed after continue_generation"
    (SGLang's `PauseGenerationReqInput`). With a stream in flight on each selected worker and
    a prefix cached there, the workers are paused in `retract`, the cache reset is called on
    each (SGLang's `flush_cache`, where the deployment allowlists it), and they are resumed:
    the retracted streams end once, successfully, and a flush that answered success left no
    cached prefix reused (one that said so and flushed nothing leaves stale prefixes behind).
    A refused flush (any non-2xx, or `success: false`) is legal, the reset "rejects active
    requests" and the trainer stays gated: reported, never failed. Held by the pause, not by
    the engine's pace."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    family = chosen.family
    first = chosen.workers[0]
    if not rl_admin.policy.permits(first.instance_id):
        raise rl_admin.policy.refusal(f"the retract pause of {first.label}")
    if RETRACT not in family.pause_modes:  # the row's other test judges the family
        pytest.skip(f"the {family.name} family has no retract pause")
    route = family.flush or family.allowlisted_flush
    if route is None:
        raise FeatureAbsent(f"the {family.name} family has no cache-reset route")
    workers = [worker for worker in pins(chosen) if worker is not None]
    if not workers:
        raise Unobservable(
            f"one worker's prefix cache: generations cannot be pinned to {chosen.label} "
            "(its system server's /metrics names no worker_id)"
        )
    for worker in workers:  # the first read caches the prefix, the second reads it cached
        cached_tokens(rl_verdict, rl_client, rl_target, worker)
    before = {worker: cached_tokens(rl_verdict, rl_client, rl_target, worker) for worker in workers}
    for worker, cached in before.items():
        if cached <= 0:
            raise Unobservable(
                f"prefix-cache reuse on {worker.label}: a repeated prompt reported "
                "cached_tokens 0 (prefix caching off?), so its invalidation cannot be observed"
            )
    streams = [in_flight(rl_client, rl_target, worker) for worker in workers]
    flushes: dict[str, Exchange] = {}
    try:
        for stream in streams:
            stream.start_and_wait_first_token(rl_verdict)
        with paused(rl_verdict, rl_admin, chosen, RETRACT):
            for worker in chosen.workers:
                exchange = rl_admin.call(worker, route, {})
                if exchange.status in NOT_SERVED:
                    raise Unobservable(
                        f"/engine/{route} answered HTTP {exchange.status} on {worker.label}: "
                        "the deployment does not allowlist it (DYN_SGLANG_ENGINE_ROUTES)"
                    )
                flushes[worker.label] = exchange
    finally:
        for stream in streams:
            stream.wait()
    refused: dict[str, str] = {}
    for worker, stream in zip(workers, streams, strict=True):
        exchange = stream.exchange
        rl_verdict.folded(exchange)
        state = exchange.state.value if exchange.state else "none"
        result = streaming.terminal_success(state, exchange.state_reason)
        rl_verdict.check(on_worker(result, worker), exchange)
        flush = flushes[worker.label]
        refusal = held_requests.flush_refusal(flush.status, flush.reply())
        if refusal is not None:
            refused[worker.label] = refusal
            continue
        after = cached_tokens(rl_verdict, rl_client, rl_target, worker)
        result = held_requests.flush_after_retract(
            flush.status, flush.reply(), before[worker], after, worker.label
        )
        rl_verdict.check(result, flush)
    rl_verdict.measure(flush_refused_after_retract=refused)
    if refused:
        raise Unobservable(
            "the cache reset after a retract pause was refused ("
            + "; ".join(f"{label}: {said}" for label, said in refused.items())
            + '): legal, the reset "rejects active requests" and a trainer keeps generation '
            "gated when cache reset fails; its invalidation after a retract pause is not observed"
        )
    require_observed(chosen, "a cache reset after a retract pause", rl_verdict)
