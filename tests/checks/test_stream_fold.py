"""A stream judged from its fold gets the verdict it gets from the full list of its payloads: the
same violations for every check that accepts a `StreamFold`, on generated completions and chat
streams and on mutations of them (one value replaced, dropped or repeated anywhere)."""

from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rl_conformance.checks import aggregate_stream, logprobs, streaming, tokens
from rl_conformance.checks.base import CheckResult
from rl_conformance.checks.stream_fold import StreamFold

from .bodies import json_paths as paths

DONE = "[DONE]"
TOKENS = ["a", "b", " c", "dé", "e"]


def completion_chunk(choice: int, ids: list[int], values: list[float], finish: str | None) -> Any:
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "choices": [
            {
                "index": choice,
                "text": "".join(TOKENS[i % 5] for i in ids),
                "logprobs": {
                    "tokens": [TOKENS[i % 5] for i in ids],
                    "token_logprobs": values,
                    "top_logprobs": [
                        {TOKENS[i % 5]: v, "zz": v - 1.0} for i, v in zip(ids, values, strict=True)
                    ],
                    "text_offset": list(range(len(ids))),
                },
                "finish_reason": finish,
            }
        ],
        "nvext": {"completion_token_ids": ids},
    }


def chat_chunk(choice: int, ids: list[int], values: list[float], finish: str | None) -> Any:
    content = [
        {
            "token": TOKENS[i % 5],
            "logprob": v,
            "token_id": i,
            "top_logprobs": [
                {"token": TOKENS[i % 5], "logprob": v},
                {"token": "zz", "logprob": v - 1},
            ],
        }
        for i, v in zip(ids, values, strict=True)
    ]
    return {
        "id": "chat-1",
        "object": "chat.completion.chunk",
        "choices": [
            {
                "index": choice,
                "delta": {"content": "".join(TOKENS[i % 5] for i in ids)},
                "logprobs": {"content": content},
                "finish_reason": finish,
            }
        ],
        "nvext": {"completion_token_ids": ids},
    }


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[Any], list[int]]:
    """A stream: one or two choices, one to three tokens per chunk, a terminal chunk per choice,
    maybe usage and engine data, then [DONE]; maybe with one fault a logprob check exists for
    (a shifted selected value, another token's id, engine data that disagrees, arrays of unequal
    length). Returns it and choice 0's ids."""
    make = draw(st.sampled_from([completion_chunk, chat_chunk]))
    choices = draw(st.integers(min_value=1, max_value=2))
    payloads: list[Any] = []
    first: list[int] = []
    first_values: list[float] = []
    for _ in range(draw(st.integers(min_value=0, max_value=6))):
        choice = draw(st.integers(min_value=0, max_value=choices - 1))
        ids = draw(st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=3))
        values = [-float(draw(st.integers(min_value=0, max_value=9))) / 4 for _ in ids]
        payloads.append(make(choice, ids, values, None))
        if choice == 0:
            first += ids
            first_values += values
    for choice in range(choices):
        payloads.append(make(choice, [], [], "length"))
    if draw(st.booleans()):
        payloads.append({"id": "x", "choices": [], "usage": {"completion_tokens": len(first)}})
    if draw(st.booleans()):
        payloads.append(
            {"choices": [], "nvext": {"engine_data": {"completion_logprobs": first_values}}}
        )
    payloads.append(DONE)
    fault = draw(st.sampled_from([None, "selected", "token_id", "engine", "tokens", "values"]))
    carrying = [
        p
        for p in payloads
        if isinstance(p, dict) and p.get("nvext", {}).get("completion_token_ids")
    ]
    if not carrying:
        return payloads, first
    chunk = draw(st.sampled_from(carrying))["choices"][0]["logprobs"]
    if fault == "selected" and chunk.get("token_logprobs"):
        chunk["token_logprobs"][-1] -= 0.5
    elif fault == "selected" and chunk.get("content"):
        chunk["content"][-1]["logprob"] -= 0.5
    elif fault == "token_id" and chunk.get("content"):
        chunk["content"][0]["token_id"] += 1
    elif fault == "engine":
        wrong = [value - 1 for value in first_values]
        payloads[-1:-1] = [
            {"choices": [], "nvext": {"engine_data": {"completion_logprobs": v}}}
            for v in draw(st.permutations([first_values, wrong]))
        ]
    elif fault in ("tokens", "values") and "tokens" in chunk:
        key = "tokens" if fault == "tokens" else "token_logprobs"
        chunk[key] = [*chunk[key], chunk[key][0]] if draw(st.booleans()) else chunk[key][1:]
    return payloads, first


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=60),
    st.sampled_from([0.5, -0.25, math.nan, math.inf, -2.0, 1e-7]),
    st.sampled_from(["a", "zz", "stop", DONE]),
    st.just([]),
    st.just({}),
    st.just([1, 2]),
)


def mutate(payloads: list[Any], path: tuple[Any, ...], action: str, value: Any) -> list[Any]:
    root = copy.deepcopy(payloads)
    if not path:
        return root
    parent: Any = root
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "drop":
        del parent[last]
    elif action == "repeat" and isinstance(parent, list):
        parent.insert(last, copy.deepcopy(parent[last]))
    return root


def fold_of(payloads: list[Any]) -> StreamFold:
    fold = StreamFold()
    for event, payload in enumerate(payloads):
        fold.add(event, payload)
    return fold


def same(listed: CheckResult, folded: CheckResult) -> None:
    assert len(listed.violations) == len(folded.violations), (listed.explain(), folded.explain())
    for left, right in zip(listed.violations, folded.violations, strict=True):
        assert (left.message, left.field, left.expected) == (
            right.message,
            right.field,
            right.expected,
        )
        if not isinstance(left.observed, dict) or "logprobs" not in left.field:
            assert repr(left.observed) == repr(right.observed)


def assert_fold_judges_as_the_list(payloads: list[Any], ids: list[int]) -> None:
    fold = fold_of(payloads)
    for choices in (1, 2):
        same(streaming.single_terminal(payloads, choices), streaming.single_terminal(fold, choices))
    same(streaming.nothing_after_terminal(payloads), streaming.nothing_after_terminal(fold))
    same(streaming.done_last(payloads), streaming.done_last(fold))
    same(tokens.stream_concat(payloads, ids), tokens.stream_concat(fold, ids))
    try:
        merged = aggregate_stream(payloads)
    except (AttributeError, TypeError):
        return  # the list itself cannot be merged: there is no verdict to match
    same(logprobs.present(merged), logprobs.present(fold))
    unaligned = any(choice.unaligned_at is not None for choice in fold.choices.values())
    folded_alignment = logprobs.selected_alignment(fold, ids)
    if unaligned and not folded_alignment.passed:
        assert (
            "unequal length" in folded_alignment.explain()
            or not logprobs.selected_alignment(merged, ids).passed
        )
        return
    same(logprobs.selected_alignment(merged, ids), folded_alignment)
    same(logprobs.finite_nonpositive(merged), logprobs.finite_nonpositive(fold))


@settings(max_examples=100)
@given(stream=streams())
def test_a_generated_stream_gets_the_same_violations_folded_as_listed(
    stream: tuple[list[Any], list[int]],
) -> None:
    payloads, ids = stream
    assert_fold_judges_as_the_list(payloads, ids)
    fold = fold_of(payloads)
    assert tokens.stream_concat(fold, fold.ids.tolist()).passed
    assert tokens.stream_concat(fold, ids).passed == (len(fold.ids) == len(ids))


@settings(max_examples=100)
@given(
    stream=streams(),
    where=st.integers(min_value=0),
    action=st.sampled_from(["replace", "drop", "repeat"]),
    value=VALUES,
    ids_change=st.sampled_from([None, "drop", "shift"]),
)
def test_a_mutated_stream_gets_the_same_violations_folded_as_listed(
    stream: tuple[list[Any], list[int]], where: int, action: str, value: Any, ids_change: str | None
) -> None:
    payloads, ids = stream
    candidates = paths(payloads)
    mutated = mutate(payloads, candidates[where % len(candidates)], action, value)
    if ids_change == "drop":
        ids = ids[1:]
    elif ids_change == "shift" and ids:
        ids = [ids[-1], *ids[:-1]]
    try:
        assert_fold_judges_as_the_list(mutated, ids)
    except RecursionError:  # pragma: no cover
        assume(False)


def test_unequal_logprob_arrays_are_reported_where_they_stop_lining_up() -> None:
    first = completion_chunk(0, [1, 2], [-0.5, -0.25], None)
    first["choices"][0]["logprobs"]["tokens"].append("extra")
    payloads = [first, completion_chunk(0, [3], [-1.0], "stop"), DONE]
    result = logprobs.selected_alignment(fold_of(payloads), [1, 2, 3])
    assert not result.passed
    assert "event 1: choices[0] logprob arrays of unequal length" in result.explain()


def test_values_paired_with_tokens_sent_ahead_of_them_are_reported() -> None:
    first = completion_chunk(0, [1], [-0.5], None)
    first["choices"][0]["logprobs"]["tokens"].append(TOKENS[2])
    second = completion_chunk(0, [2], [-1.0], "stop")
    del second["choices"][0]["logprobs"]["tokens"]
    result = logprobs.selected_alignment(fold_of([first, second, DONE]), [1, 2])
    assert "event 1: choices[0] logprob arrays of unequal length" in result.explain()


def test_another_tokens_id_is_named_before_a_disagreeing_top_entry_at_the_same_position() -> None:
    first = chat_chunk(0, [0], [-0.5], None)
    first["choices"][0]["logprobs"]["content"][0]["logprob"] = -0.75
    payloads = [first, chat_chunk(0, [1], [-0.25], None), chat_chunk(0, [], [], "length"), DONE]
    folded = logprobs.selected_alignment(fold_of(payloads), [1, 0])
    same(logprobs.selected_alignment(aggregate_stream(payloads), [1, 0]), folded)
    assert folded.violations[0].message == "position 0 carries the logprob of another token"


def test_the_fold_keeps_ids_and_logprobs_in_arrays_not_events() -> None:
    payloads = [completion_chunk(0, [i], [-0.5], None) for i in range(100)]
    payloads += [completion_chunk(0, [], [], "stop"), DONE]
    fold = fold_of(payloads)
    assert fold.ids.tolist() == list(range(100))
    assert fold.nbytes == 100 * 8 * 2
    assert fold.payloads == 102 and fold.done == 1 and fold.last == DONE
    assert tokens.stream_concat(fold, list(range(100))).passed
    assert not tokens.stream_concat(fold, list(range(1, 101))).passed


def test_ids_beyond_64_bits_are_still_concatenated() -> None:
    payloads = [
        {"nvext": {"completion_token_ids": [1]}},
        {"nvext": {"completion_token_ids": [2**70]}},
    ]
    assert tokens.stream_concat(fold_of(payloads), [1, 2**70]).passed
    assert not tokens.stream_concat(fold_of(payloads), [1, 2]).passed
