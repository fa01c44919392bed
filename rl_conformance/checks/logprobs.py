"""Logprob alignment: selected, top-k and prompt log probabilities line up with the token ids."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .base import MISSING, Findings, Violation, check, describe, get_path

SECTION = "Preserve Token Authority"
ABS_TOLERANCE = 1e-4
REL_TOLERANCE = 1e-5
# Dynamo re-encodes logprobs as f32: a value of exactly 0 may come back as a tiny positive number.
POSITIVE_SLACK = 1e-6


@dataclass(frozen=True)
class Position:
    """One generated token's logprob data, whatever the response format."""

    token: Any
    logprob: Any
    token_id: Any
    top: list[tuple[Any, Any]] | None


def positions(choice: Any) -> list[Position] | None:
    """Normalise a completions or chat choice's `logprobs`; None when there are none."""
    logprobs = get_path(choice, "logprobs")
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")
    if isinstance(content, list):
        found = []
        for entry in content:
            entry = entry if isinstance(entry, dict) else {}
            top = entry.get("top_logprobs")
            pairs = (
                [(item.get("token"), item.get("logprob")) for item in top if isinstance(item, dict)]
                if isinstance(top, list)
                else None
            )
            found.append(
                Position(
                    entry.get("token"), entry.get("logprob", MISSING), entry.get("token_id"), pairs
                )
            )
        return found
    values = logprobs.get("token_logprobs")
    if not isinstance(values, list):
        return None
    raw_tokens, raw_tops = logprobs.get("tokens"), logprobs.get("top_logprobs")
    tokens: list[Any] = raw_tokens if isinstance(raw_tokens, list) else []
    tops: list[Any] = raw_tops if isinstance(raw_tops, list) else []
    found = []
    for index, value in enumerate(values):
        token = tokens[index] if index < len(tokens) else MISSING
        top = tops[index] if index < len(tops) else None
        pairs = list(top.items()) if isinstance(top, dict) else None
        found.append(Position(token, value, None, pairs))
    return found


def close(left: float, right: float) -> bool:
    return math.isclose(left, right, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@check(
    "logprobs.present",
    title="logprobs that were requested are returned",
    spec="Check support and alignment on the exact backend and response path.",
    section="Know What Returns to the Trainer",
)
def present(body: Any) -> Findings:
    choices = get_path(body, "choices")
    for index, choice in enumerate(choices if isinstance(choices, list) else []):
        if positions(choice) is None:
            yield Violation(
                f"choices[{index}].logprobs is absent or null although logprobs were requested",
                f"choices[{index}].logprobs",
                "logprobs object",
                describe(get_path(choice, "logprobs")),
            )


@check(
    "logprobs.selected_alignment",
    title="selected logprobs match the generated token ids in length and order",
    spec="Selected log probabilities match those token IDs in length and order.",
    section=SECTION,
)
def selected_alignment(body: Any, completion_ids: Sequence[int]) -> Findings:
    choice = get_path(body, "choices", 0)
    found = positions(choice)
    if found is None:
        yield Violation(
            "choices[0].logprobs is absent or null although logprobs were requested",
            "choices[0].logprobs",
            "logprobs object",
            describe(get_path(choice, "logprobs")),
        )
        return
    if len(found) != len(completion_ids):
        yield Violation(
            f"{len(found)} selected logprobs for {len(completion_ids)} generated ids",
            "choices[0].logprobs",
            len(completion_ids),
            len(found),
        )
        return
    raw = get_path(choice, "logprobs")
    tokens = raw.get("tokens") if isinstance(raw, dict) else None
    if isinstance(tokens, list) and len(tokens) != len(completion_ids):
        yield Violation(
            f"{len(tokens)} logprob tokens for {len(completion_ids)} generated ids",
            "choices[0].logprobs.tokens",
            len(completion_ids),
            len(tokens),
        )
    for index, position in enumerate(found):
        if position.token_id is not None and position.token_id != completion_ids[index]:
            yield Violation(
                f"position {index} carries the logprob of another token",
                f"choices[0].logprobs.content[{index}].token_id",
                completion_ids[index],
                position.token_id,
            )
            return
        own = _own_top_value(position)
        if own is not None and _is_number(position.logprob) and not close(own, position.logprob):
            yield Violation(
                f"position {index}: selected logprob differs from the same token's "
                "top-logprob entry (values reordered or shifted?)",
                f"choices[0].logprobs[{index}]",
                own,
                position.logprob,
            )
            return
    engine = get_path(body, "nvext", "engine_data", "completion_logprobs")
    if isinstance(engine, list):
        selected = [position.logprob for position in found]
        if len(engine) != len(selected) or not all(
            _is_number(a) and _is_number(b) and close(a, b)
            for a, b in zip(engine, selected, strict=False)
        ):
            yield Violation(
                "engine_data.completion_logprobs disagrees with the selected logprobs",
                "nvext.engine_data.completion_logprobs",
                selected,
                engine,
            )


def _own_top_value(position: Position) -> float | None:
    if position.top is None or position.token is MISSING:
        return None
    for token, value in position.top:
        if token == position.token and _is_number(value):
            return float(value)
    return None


@check(
    "logprobs.finite_nonpositive",
    title="every logprob is a finite number <= 0",
    spec="Selected log probabilities match those token IDs in length and order.",
    section=SECTION,
)
def finite_nonpositive(body: Any) -> Findings:
    choices = get_path(body, "choices")
    for choice_index, choice in enumerate(choices if isinstance(choices, list) else []):
        for index, position in enumerate(positions(choice) or []):
            values = [("selected", position.logprob)] + [
                (f"top[{token!r}]", value) for token, value in position.top or []
            ]
            for label, value in values:
                if not _is_number(value) or not math.isfinite(value) or value > POSITIVE_SLACK:
                    yield Violation(
                        f"choices[{choice_index}] position {index} {label} logprob "
                        "is not a finite number <= 0",
                        f"choices[{choice_index}].logprobs[{index}]",
                        "finite <= 0",
                        describe(value),
                    )
                    return


@check(
    "logprobs.topk_consistent",
    title="top logprobs hold at most k+1 entries, include the selected token, and are ordered",
    spec="Check support and alignment on the exact backend and response path.",
    section="Know What Returns to the Trainer",
)
def topk_consistent(body: Any, k: int, greedy: bool) -> Findings:
    """At temperature 0 the selected token must also be the most likely one."""
    choice = get_path(body, "choices", 0)
    for index, position in enumerate(positions(choice) or []):
        where = f"choices[0].logprobs[{index}].top_logprobs"
        if position.top is None:
            if k > 0:
                yield Violation(
                    f"position {index}: top logprobs missing", where, f"{k} entries", None
                )
                return
            continue
        if len(position.top) > k + 1:
            yield Violation(
                f"position {index}: more than k+1 top entries",
                where,
                f"<= {k + 1}",
                len(position.top),
            )
            return
        if k > 0 and len(position.top) < min(k, 1):
            yield Violation(
                f"position {index}: fewer top entries than requested", where, k, len(position.top)
            )
            return
        own = _own_top_value(position)
        if own is None and (position.top or k > 0):
            yield Violation(
                f"position {index}: the selected token {position.token!r} is not among "
                "the top logprobs",
                where,
                position.token,
                [token for token, _ in position.top],
            )
            return
        others = [value for token, value in position.top if token != position.token]
        if not all(_is_number(value) for value in others):
            continue
        if any(a < b for a, b in itertools.pairwise(others)) and isinstance(
            get_path(choice, "logprobs", "content"), list
        ):
            yield Violation(
                f"position {index}: top logprobs not in descending order",
                where,
                sorted(others, reverse=True),
                others,
            )
            return
        if greedy and own is not None and others and max(others) > own + ABS_TOLERANCE:
            yield Violation(
                f"position {index}: at temperature 0 the selected token is not the most likely one",
                where,
                f">= {max(others)}",
                own,
            )
            return


@check(
    "logprobs.prompt_alignment",
    title="prompt logprobs: one entry per prompt token, position 0 undefined, never shifted",
    spec="Prompt log probabilities preserve undefined positions instead of shifting alignment.",
    section=SECTION,
)
def prompt_alignment(
    prompt_logprobs: Any, prompt_ids: Sequence[int], where: str = "prompt_logprobs"
) -> Findings:
    if not isinstance(prompt_logprobs, list):
        yield Violation(f"{where} is not an array", where, "array", describe(prompt_logprobs))
        return
    if len(prompt_logprobs) != len(prompt_ids):
        yield Violation(
            f"{len(prompt_logprobs)} prompt logprob entries for {len(prompt_ids)} prompt tokens",
            where,
            len(prompt_ids),
            len(prompt_logprobs),
        )
        return
    if prompt_logprobs and prompt_logprobs[0] is not None:
        yield Violation(
            "position 0 must stay undefined (null)", f"{where}[0]", None, prompt_logprobs[0]
        )
    for index in range(1, len(prompt_ids)):
        entry = prompt_logprobs[index]
        key = str(prompt_ids[index])
        if not isinstance(entry, dict) or key not in entry:
            yield Violation(
                f"position {index} does not describe prompt token {prompt_ids[index]} "
                "(shifted or missing)",
                f"{where}[{index}]",
                f"an entry keyed {key!r}",
                sorted(entry) if isinstance(entry, dict) else entry,
            )
            return
        value = get_path(entry, key, "logprob")
        if not _is_number(value) or not math.isfinite(value) or value > POSITIVE_SLACK:
            yield Violation(
                f"position {index}: logprob is not a finite number <= 0",
                f"{where}[{index}][{key!r}].logprob",
                "finite <= 0",
                describe(value),
            )
            return


@check(
    "logprobs.sglang_alignment",
    title="native SGLang logprobs: input[0] undefined, output triples carry output_ids in order",
    spec="Use the native SGLang route when the framework already speaks that schema; prompt log "
    "probabilities preserve undefined positions instead of shifting alignment.",
    section="Choose a Request Interface",
)
def sglang_alignment(final: Any, prompt_ids: Sequence[int] | None = None) -> Findings:
    output_ids = get_path(final, "output_ids")
    meta = get_path(final, "meta_info")
    outputs = get_path(meta, "output_token_logprobs")
    if not isinstance(output_ids, list) or not isinstance(outputs, list):
        yield Violation(
            "output_ids and meta_info.output_token_logprobs must both be arrays",
            "meta_info.output_token_logprobs",
            "array",
            describe(outputs),
        )
        return
    if len(outputs) != len(output_ids):
        yield Violation(
            f"{len(outputs)} output logprobs for {len(output_ids)} output ids",
            "meta_info.output_token_logprobs",
            len(output_ids),
            len(outputs),
        )
        return
    for index, triple in enumerate(outputs):
        token = get_path(triple, 1)
        value = get_path(triple, 0)
        if token != output_ids[index]:
            yield Violation(
                f"output_token_logprobs[{index}][1] is not output_ids[{index}]",
                f"meta_info.output_token_logprobs[{index}][1]",
                output_ids[index],
                describe(token),
            )
            return
        if not _is_number(value) or not math.isfinite(value) or value > POSITIVE_SLACK:
            yield Violation(
                f"output_token_logprobs[{index}][0] is not a finite number <= 0",
                f"meta_info.output_token_logprobs[{index}][0]",
                "finite <= 0",
                describe(value),
            )
            return
    inputs = get_path(meta, "input_token_logprobs")
    if prompt_ids is None or inputs is MISSING:
        return
    if not isinstance(inputs, list) or len(inputs) != len(prompt_ids):
        yield Violation(
            "input_token_logprobs must have one triple per prompt token",
            "meta_info.input_token_logprobs",
            len(prompt_ids),
            len(inputs) if isinstance(inputs, list) else describe(inputs),
        )
        return
    if inputs and get_path(inputs, 0, 0) is not None:
        yield Violation(
            "input_token_logprobs[0] must have a null logprob (position 0 undefined)",
            "meta_info.input_token_logprobs[0][0]",
            None,
            get_path(inputs, 0, 0),
        )
    ids = [get_path(triple, 1) for triple in inputs]
    if ids != list(prompt_ids):
        yield Violation(
            "input_token_logprobs token ids differ from the prompt ids",
            "meta_info.input_token_logprobs[*][1]",
            list(prompt_ids),
            ids,
        )
