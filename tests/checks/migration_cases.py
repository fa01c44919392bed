"""Faithful and violating observations of the migration check, from the real Dynamo 1.6.1
recording of a stream whose worker was SIGKILLed on a frontend with --migration-limit 3."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from rl_conformance.checks import CheckResult, migration

from . import recorded

Case = tuple[Callable[[], CheckResult], Callable[[], CheckResult]]
MIGRATED = "toy-worker/migration_worker_killed_stream"
UNBROKEN = "toy-worker/migration_unbroken_reference"
NOT_MIGRATED = "toy-worker/worker_killed_stream_without_migration"
LIMIT = 3
READ_BEFORE_KILL = 20


def payloads(case: str) -> list[Any]:
    return [event for event in recorded.events(case) if event != "[DONE]"]


def unbroken() -> migration.Spliced:
    """The recorded unbroken run of the same request (unary: its ids, logprobs and usage are
    what the unbroken stream carries)."""
    body = recorded.body(UNBROKEN)
    return migration.Spliced(
        state="success",
        error=None,
        finish_reason=body["choices"][0]["finish_reason"],
        ids=body["nvext"]["completion_token_ids"],
        logprobs=len(body["choices"][0]["logprobs"]["token_logprobs"]),
        usage_completion_tokens=body["usage"]["completion_tokens"],
        max_tokens=200,
        read_before_kill=0,
    )


def observed(events: list[Any], state: str = "success") -> migration.Spliced:
    folded, _ = migration.spliced(events, state, None, 200, READ_BEFORE_KILL)
    return folded


def with_repeated_splice_token() -> list[Any]:
    """The recording with the chunk before the splice sent twice (its id, text and logprob)."""
    events = payloads(MIGRATED)
    return [*events[:READ_BEFORE_KILL], copy.deepcopy(events[READ_BEFORE_KILL - 1]), *events[20:]]


CASES: dict[str, Case] = {
    "migration.continuity": (
        lambda: migration.continuity(observed(payloads(MIGRATED)), unbroken(), LIMIT),
        lambda: migration.continuity(observed(with_repeated_splice_token()), unbroken(), LIMIT),
    ),
}
