"""What the refresh suites send and read: their fixed prompt, the number of consecutive refits
their checks go through, a generation pinned to one worker (its ids and the version it names),
and a stream pinned to one worker that stays in flight across a control step."""

from __future__ import annotations

from typing import Any

from ..checks import aggregate_stream, logprobs, tokens
from ..checks.base import CheckResult
from ..client.http import Client
from ..model.target import Target
from ..model.verdict import FeatureAbsent, Verdict
from ..wire.exchange import Exchange
from .admin import AdminWorker
from .each_worker import on_worker
from .inflight import InFlightStream, in_flight_budget
from .refresh import completion_ids, pinned_generation, reported_version
from .requests import chat, completion

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
REFITS = 3
"""Consecutive refits the version, served-policy and cache checks go through: what works on
the first refit only is a bug trainers hit on their second step."""


def generate_ids(
    rl_verdict: Verdict, rl_client: Client, rl_target: Target, worker: AdminWorker | None
) -> tuple[list[int], Any]:
    """The completion ids of `PROMPT` pinned to `worker`, and the weight version it names."""
    exchange = pinned_generation(rl_client, rl_target, worker, PROMPT)
    rl_verdict.json(exchange)
    ids = completion_ids(exchange)
    if ids is None:
        raise FeatureAbsent("completion_token_ids unavailable on the pinned route")
    return ids, reported_version(exchange)


def in_flight(
    rl_client: Client,
    rl_target: Target,
    worker: AdminWorker | None,
    max_tokens: int | None = None,
) -> InFlightStream:
    """A stream pinned to `worker` (unpinned for None: `each_worker.pins`), long enough to be in
    flight across a control step (`in_flight_budget`), unless `max_tokens` says otherwise."""
    budget = in_flight_budget(rl_client, rl_target, len(PROMPT))
    return InFlightStream(
        rl_client,
        rl_target,
        PROMPT,
        instance_id=None if worker is None else worker.instance_id,
        max_tokens=budget if max_tokens is None else min(max_tokens, budget),
    )


GENERATION_ROUTES = (("completions", False), ("completions", True), ("chat", False), ("chat", True))
"""The OpenAI-compatible routes a post-update generation is judged on, unary and streamed."""
POST_UPDATE_TOKENS = 8
POST_UPDATE_TOP = 2


def judge_post_update_generations(
    rl_verdict: Verdict, rl_client: Client, rl_target: Target, worker: AdminWorker | None
) -> None:
    """After an update, one generation with log probabilities on each of `GENERATION_ROUTES`,
    pinned to `worker`, judged as the data-plane suites judge any: engine ids present, selected
    log probabilities aligned with them, every log probability finite and non-positive (an
    update that leaves the engine answering NaN passes every check that reads only ids)."""
    for route, stream in GENERATION_ROUTES:
        exchange, schema = _pinned_route(rl_client, rl_target, worker, route, stream)
        if stream:
            body = aggregate_stream(rl_verdict.events(exchange, schema=f"{schema}-chunk"))
        else:
            body = rl_verdict.json(exchange, schema=schema)
        ids = body.get("nvext", {}).get("completion_token_ids") if isinstance(body, dict) else None
        found: list[CheckResult] = [
            tokens.completion_ids_present(body),
            logprobs.present(body),
            logprobs.finite_nonpositive(body),
        ]
        if isinstance(ids, list):
            found.append(logprobs.selected_alignment(body, ids))
        for result in found:
            rl_verdict.check(on_worker(result, worker), exchange)


def _pinned_route(
    client: Client, target: Target, worker: AdminWorker | None, route: str, stream: bool
) -> tuple[Exchange, str]:
    nvext: dict[str, Any] = {}
    headers: dict[str, str] = {}
    if worker is not None and worker.instance_id is not None:
        nvext["backend_instance_id"] = worker.instance_id
        headers["x-dynamo-worker-instance-id"] = str(worker.instance_id)
    common: dict[str, Any] = {
        "max_tokens": POST_UPDATE_TOKENS,
        "temperature": 0,
        "stream": stream,
        "extra_fields": ("completion_token_ids",),
        "headers": headers,
        "nvext": nvext,
    }
    if route == "completions":
        return completion(client, target, PROMPT, logprobs=POST_UPDATE_TOP, **common), "completion"
    exchange = chat(
        client, target, token_data=PROMPT, logprobs=True, top_logprobs=POST_UPDATE_TOP, **common
    )
    return exchange, "chat-completion"
