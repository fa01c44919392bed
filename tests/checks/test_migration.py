"""The migration check against real Dynamo 1.6.1 recordings and the ways a splice goes wrong."""

from __future__ import annotations

import copy

from rl_conformance.checks import migration

from .migration_cases import (
    LIMIT,
    MIGRATED,
    NOT_MIGRATED,
    observed,
    payloads,
    unbroken,
    with_repeated_splice_token,
)


def test_the_recorded_migrated_stream_passes_and_its_quirks_are_measured() -> None:
    folded, seen = migration.spliced(payloads(MIGRATED), "success", None, 200, 20)
    assert migration.continuity(folded, unbroken(), LIMIT).passed
    # Dynamo 1.6.1 counts the re-prefilled tokens as prompt and keeps only the second worker's
    # ids in engine_data: measured beside the verdict, not judged
    assert seen == {"prompt_tokens": 28, "engine_data_ids": 180}


def test_a_stream_that_ended_in_an_error_was_not_migrated() -> None:
    result = migration.continuity(observed(payloads(NOT_MIGRATED)), unbroken(), LIMIT)
    assert not result.passed
    assert "was not continued elsewhere" in result.violations[0].message
    assert "service_unavailable" in str(result.violations[0].observed)


def test_a_repeated_splice_token_fails_by_count_and_by_position() -> None:
    result = migration.continuity(observed(with_repeated_splice_token()), unbroken(), LIMIT)
    fields = [violation.field for violation in result.violations]
    # the logprobs came with their ids (201, against the unbroken 200), usage counts 200
    assert fields == [
        "nvext.completion_token_ids",
        "nvext.completion_token_ids[20]",
        "choices[0].logprobs.token_logprobs",
    ]


def test_without_a_deterministic_reference_only_counts_are_judged() -> None:
    events = payloads(MIGRATED)
    swapped = copy.deepcopy(events)
    first, second = swapped[3]["nvext"], swapped[4]["nvext"]
    first["completion_token_ids"], second["completion_token_ids"] = (
        second["completion_token_ids"],
        first["completion_token_ids"],
    )
    assert migration.continuity(observed(swapped), unbroken(), LIMIT, deterministic=False).passed
    assert not migration.continuity(observed(swapped), unbroken(), LIMIT).passed


def test_usage_and_logprobs_are_held_to_the_spliced_ids() -> None:
    events = payloads(MIGRATED)
    miscounted = copy.deepcopy(events)
    miscounted[-1]["usage"]["completion_tokens"] = 180
    result = migration.continuity(observed(miscounted), unbroken(), LIMIT)
    assert [v.field for v in result.violations] == ["usage.completion_tokens"]
    dropped = copy.deepcopy(events)
    dropped[5]["choices"][0]["logprobs"]["token_logprobs"] = []
    result = migration.continuity(observed(dropped), unbroken(), LIMIT)
    assert [v.field for v in result.violations] == ["choices[0].logprobs.token_logprobs"]


def test_an_unbroken_stream_that_ends_badly_is_no_reference() -> None:
    assert migration.reference_problem(unbroken()) is None
    cut = observed(payloads(NOT_MIGRATED), state="failed")
    assert migration.reference_problem(cut) is not None


def test_a_migrated_stream_that_names_no_ids_fails() -> None:
    events = payloads(MIGRATED)
    for event in events:
        if isinstance(event, dict):
            (event.get("nvext") or {}).pop("completion_token_ids", None)
    result = migration.continuity(observed(events), unbroken(), LIMIT)
    assert [v.field for v in result.violations] == ["nvext.completion_token_ids"]
    unnamed = observed(events)
    assert migration.reference_problem(unnamed) == "carries no nvext.completion_token_ids"
