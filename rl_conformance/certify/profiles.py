"""Framework consumer profiles: the request shapes and administration routes that verl, NeMo RL,
slime and prime-rl use on their documented Dynamo (or OpenAI-compatible / SGLang) paths, replayed
against a deployment: "will framework X work here".

Each profile is read from the framework's public sources; the sources, commits and confidence
are in `fixtures/framework-profiles/<framework>.json`. Replays are read-only: a refresh surface is
judged from discovery (the routes the framework calls must be advertised), never by calling it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..client.http import Client
from ..model.capabilities import RL_WORKERS, Backend, Capability, Level, Support
from ..model.matrix import Evidence, Outcome, TestRecord
from ..model.target import Target

PROMPT = [101, 102, 103, 104, 105]
MAX_TOKENS = 4
TERMINAL = ("stop", "length")
SOURCES = "fixtures/framework-profiles"


def _path(document: Any, *keys: Any) -> Any:
    for key in keys:
        if isinstance(key, int):
            if not isinstance(document, list) or len(document) <= key:
                return None
        elif not isinstance(document, dict):
            return None
        document = document[key] if isinstance(key, int) else document.get(key)
    return document


def _first(document: Any, paths: Sequence[tuple[Any, ...]]) -> Any:
    for path in paths:
        found = _path(document, *path)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class RefreshSurface:
    """How a framework administers the workers, as far as the deployment's surface shows it."""

    routes: tuple[str, ...]
    """Routes it calls at `{system_url}/engine/<route>`."""
    finds_workers: str
    """`discovery` (it reads /v1/rl/workers) or `own-fleet` (it launched the workers itself)."""


@dataclass(frozen=True)
class Profile:
    framework: str
    route: str
    body: Callable[[str], dict[str, Any]]
    token_ids: Callable[[Any], Any]
    logprobs: Callable[[Any], Any]
    finish_reason: Callable[[Any], Any]
    refresh: RefreshSurface | None
    """None: the refresh does not go over HTTP to the deployment (nothing to check here)."""
    refresh_note: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def source(self) -> str:
        return f"{SOURCES}/{self.framework}.json"


def _choice(document: Any) -> Any:
    return _path(document, "choices", 0)


PROFILES: tuple[Profile, ...] = (
    Profile(
        "nemo-rl",
        "/v1/completions",
        lambda model: {
            "model": model,
            "prompt": PROMPT,
            "max_tokens": MAX_TOKENS,
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": -1,
            "n": 1,
            "logprobs": 0,
            "include_stop_str_in_output": True,
            "nvext": {"extra_fields": ["completion_token_ids"]},
        },
        token_ids=lambda d: _path(d, "nvext", "completion_token_ids"),
        logprobs=lambda d: _path(d, "choices", 0, "logprobs", "token_logprobs"),
        finish_reason=lambda d: _path(d, "choices", 0, "finish_reason"),
        refresh=RefreshSurface(
            (
                "init_weights_update_group",
                "update_weights_from_distributed",
                "pause_generation",
                "resume_generation",
            ),
            "own-fleet",
        ),
    ),
    Profile(
        "verl",
        "/v1/completions",
        lambda model: {
            "model": model,
            "prompt": PROMPT,
            "max_tokens": MAX_TOKENS,
            "stream": False,
            "logprobs": 0,
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": -1,
            "nvext": {"extra_fields": ["engine_data", "completion_token_ids"]},
        },
        token_ids=lambda d: _first(
            d,
            [
                ("choices", 0, "token_ids"),
                ("choices", 0, "output_token_ids"),
                ("choices", 0, "completion_token_ids"),
                ("nvext", "completion_token_ids"),
                ("nvext", "output_token_ids"),
                ("nvext", "generated_token_ids"),
                ("nvext", "engine_data", "completion_token_ids"),
                ("choices", 0, "nvext", "completion_token_ids"),
            ],
        ),
        logprobs=lambda d: _first(
            d,
            [
                ("nvext", "engine_data", "completion_logprobs"),
                ("choices", 0, "logprobs", "token_logprobs"),
            ],
        ),
        finish_reason=lambda d: _path(d, "choices", 0, "finish_reason"),
        refresh=None,
        refresh_note="verl refreshes through Ray actors and ZMQ control sidecars, not over HTTP",
        headers=(("x-request-id", "verl-profile-replay"),),
    ),
    Profile(
        "slime",
        "/generate",
        lambda model: {
            "input_ids": PROMPT,
            "sampling_params": {
                "temperature": 1.0,
                "top_p": 1.0,
                "top_k": -1,
                "max_new_tokens": MAX_TOKENS,
                "skip_special_tokens": False,
                "no_stop_trim": True,
                "spaces_between_special_tokens": False,
            },
            "return_logprob": True,
        },
        token_ids=lambda d: (
            [pair[1] for pair in (_path(d, "meta_info", "output_token_logprobs") or [])] or None
        ),
        logprobs=lambda d: (
            [pair[0] for pair in (_path(d, "meta_info", "output_token_logprobs") or [])] or None
        ),
        finish_reason=lambda d: _path(d, "meta_info", "finish_reason", "type"),
        refresh=None,
        refresh_note="slime administers each SGLang server directly (its own URLs), not through "
        "Dynamo",
    ),
    Profile(
        "prime-rl",
        "/v1/chat/completions",
        lambda model: {
            "model": model,
            "messages": [{"role": "user", "content": ""}],
            "stream": False,
            "logprobs": True,
            "max_completion_tokens": MAX_TOKENS,
            "temperature": 1.0,
            "top_p": 1.0,
            "nvext": {"extra_fields": ["engine_data"], "token_data": PROMPT},
        },
        token_ids=lambda d: _first(
            d, [("nvext", "engine_data", "completion_token_ids"), ("choices", 0, "token_ids")]
        ),
        logprobs=lambda d: (
            _first(
                d,
                [("nvext", "engine_data", "completion_logprobs")],
            )
            or [
                item.get("logprob")
                for item in (_path(d, "choices", 0, "logprobs", "content") or [])
            ]
            or None
        ),
        finish_reason=lambda d: _path(d, "choices", 0, "finish_reason"),
        refresh=RefreshSurface(
            ("pause_generation", "update_weights_from_disk", "resume_generation"), "discovery"
        ),
    ),
)

GENERATION = Capability(
    "profile.generation",
    "The framework's rollout request works and returns what it reads",
    "profile",
    Level.MUST,
    "Preserve Token Authority",
    "Generated token IDs are present and contain the expected number of choices. Selected log "
    "probabilities match those token IDs in length and order.",
    {backend: Support.SUPPORTED for backend in Backend},
)
REFRESH = Capability(
    "profile.refresh_surface",
    "Every administration route the framework calls is advertised",
    "profile",
    Level.MUST,
    "Discover Workers Safely",
    "Refresh discovery before each control phase and require the complete capability set for "
    "the selected update path.",
    dict(RL_WORKERS),
)
PROFILE_CAPABILITIES = (GENERATION, REFRESH)


def profile_target(profile: Profile, deployment: Target) -> Target:
    return Target(
        id=f"{profile.framework}@{deployment.id}",
        backend=deployment.backend,
        kind=deployment.kind,
        frontend_url=deployment.frontend_url,
        rl_url=deployment.rl_url,
        model=deployment.model,
        versions=dict(deployment.versions),
        notes=[f"{profile.framework}'s rollout client as read from {profile.source}"],
        release=deployment.release,
        release_source=deployment.release_source,
    )


def _record(
    capability: Capability, target: Target, outcome: Outcome, reason: str, **evidence: Any
) -> TestRecord:
    failed = outcome in (Outcome.FAIL, Outcome.ERROR)
    return TestRecord(
        f"{capability.id}[{target.id}]",
        (capability.id,),
        target.id,
        outcome,
        reason,
        checks=[(capability.id, not failed)] if outcome is not Outcome.SKIPPED else [],
        evidence=[Evidence(capability.id, reason, **evidence)] if failed else [],
    )


def replay_generation(profile: Profile, deployment: Target, client: Client) -> TestRecord:
    target = profile_target(profile, deployment)
    body = profile.body(deployment.model or "")
    exchange = client.post(deployment.url(profile.route), body, headers=dict(profile.headers))
    if exchange.error is not None or exchange.status is None or not 200 <= exchange.status < 300:
        return _record(
            GENERATION,
            target,
            Outcome.FAIL,
            f"{profile.framework}'s {profile.route} request was refused: HTTP {exchange.status} "
            f"{exchange.error or exchange.body_preview()}",
            field="status",
            expected="2xx",
            observed=exchange.status,
            reproducer=exchange.curl(),
        )
    try:
        document = exchange.json()
    except ValueError as exc:
        return _record(
            GENERATION,
            target,
            Outcome.FAIL,
            f"the reply is not JSON: {exc}",
            reproducer=exchange.curl(),
        )
    ids, logprobs = profile.token_ids(document), profile.logprobs(document)
    finish = profile.finish_reason(document)
    problems = []
    if not (isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids)):
        problems.append(("token ids", "a non-empty list of ints where it reads them", ids))
    if not (isinstance(logprobs, list) and isinstance(ids, list) and len(logprobs) == len(ids)):
        problems.append(("logprobs", "one per token id where it reads them", logprobs))
    if finish not in TERMINAL:
        problems.append(("finish_reason", "stop or length", finish))
    if problems:
        what, expected, observed = problems[0]
        return _record(
            GENERATION,
            target,
            Outcome.FAIL,
            f"{profile.framework} would not find its {what}: expected {expected}, observed "
            f"{str(observed)[:200]}",
            field=what,
            expected=expected,
            observed=observed,
            reproducer=exchange.curl(),
        )
    return _record(
        GENERATION, target, Outcome.PASS, f"{len(ids)} token ids and logprobs where it reads them"
    )


def replay_refresh(profile: Profile, deployment: Target, client: Client) -> TestRecord:
    target = profile_target(profile, deployment)
    surface = profile.refresh
    if surface is None:
        return _record(REFRESH, target, Outcome.SKIPPED, profile.refresh_note)
    if not deployment.rl_url:
        return _record(
            REFRESH,
            target,
            Outcome.SKIPPED,
            "no RL listener URL (--rl-url): the advertised routes cannot be read",
        )
    exchange = client.get(deployment.rl("/v1/rl/workers"))
    try:
        workers = [w for w in exchange.json().get("workers") or [] if isinstance(w, dict)]
    except (ValueError, AttributeError):
        workers = []
    if exchange.status != 200 or not workers:
        return _record(
            REFRESH,
            target,
            Outcome.ABSENT,
            f"discovery lists no worker (HTTP {exchange.status}): {profile.framework} has "
            "nothing to administer",
        )
    for worker in workers:
        missing = [r for r in surface.routes if r not in (worker.get("routes") or [])]
        if missing or not worker.get("system_url"):
            return _record(
                REFRESH,
                target,
                Outcome.FAIL,
                f"worker {worker.get('instance_id')} does not advertise "
                f"{', '.join(missing) or 'a system_url'}, which {profile.framework} calls",
                field="routes",
                expected=list(surface.routes),
                observed=worker.get("routes"),
                reproducer=exchange.curl(),
            )
    return _record(
        REFRESH,
        target,
        Outcome.PASS,
        f"{len(workers)} worker(s) advertise {', '.join(surface.routes)}",
    )


def replay(deployment: Target, client: Client) -> tuple[list[Target], list[TestRecord]]:
    targets = [profile_target(profile, deployment) for profile in PROFILES]
    records = [
        record
        for profile in PROFILES
        for record in (
            replay_generation(profile, deployment, client),
            replay_refresh(profile, deployment, client),
        )
    ]
    return targets, records
