"""Logprob alignment: selected, top-k and prompt log probabilities line up with the token ids."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from .. import contract
from .base import MISSING, Findings, Folded, Violation, check, describe, get_path
from .positions import (  # noqa: F401  (re-exported: the names this module has always offered)
    ABS_TOLERANCE,
    POSITIVE_SLACK,
    REL_TOLERANCE,
    Position,
    close,
    completion_position,
    content_position,
    is_number,
    not_finite_nonpositive,
    own_top_disagreement,
    own_top_value,
    positions,
)

if TYPE_CHECKING:
    from .stream_fold import StreamFold


@check(
    "logprobs.present",
    title="logprobs that were requested are returned",
    spec="Check support and alignment on the exact backend and response path.",
    section="Know What Returns to the Trainer",
)
def present(body: Any) -> Findings:
    if isinstance(body, Folded):
        for index, choice in enumerate(cast("StreamFold", body).merged_choices()):
            if choice.positions() is None:
                yield _absent_logprobs(index, choice.logprobs_summary())
        return
    choices = get_path(body, "choices")
    for index, choice in enumerate(choices if isinstance(choices, list) else []):
        if positions(choice) is None:
            yield _absent_logprobs(index, get_path(choice, "logprobs"))


@check(contract.logprobs.SELECTED_ALIGNMENT)
def selected_alignment(body: Any, completion_ids: Sequence[int]) -> Findings:
    if isinstance(body, Folded):
        yield from _folded_selected_alignment(cast("StreamFold", body), completion_ids)
        return
    choice = get_path(body, "choices", 0)
    found = positions(choice)
    if found is None:
        yield _absent_logprobs(0, get_path(choice, "logprobs"))
        return
    if len(found) != len(completion_ids):
        yield _count_differs(len(found), len(completion_ids))
        return
    raw = get_path(choice, "logprobs")
    tokens = raw.get("tokens") if isinstance(raw, dict) else None
    if isinstance(tokens, list) and len(tokens) != len(completion_ids):
        yield _tokens_count_differs(len(tokens), len(completion_ids))
    for index, position in enumerate(found):
        if position.token_id is not None and position.token_id != completion_ids[index]:
            yield _other_token(index, completion_ids[index], position.token_id)
            return
        own = own_top_disagreement(position)
        if own is not None:
            yield _own_differs(index, own, position.logprob)
            return
    engine = get_path(body, "nvext", "engine_data", "completion_logprobs")
    if isinstance(engine, list):
        selected = [position.logprob for position in found]
        if not _same_logprobs(engine, selected):
            yield _engine_differs(selected, engine)


def _folded_selected_alignment(fold: StreamFold, completion_ids: Sequence[int]) -> Findings:
    """`selected_alignment` of the merged stream, from what the fold kept."""
    merged = fold.merged_choices()
    choice = merged[0] if merged else None
    found = choice.positions() if choice is not None else None
    if choice is None or found is None:
        yield _absent_logprobs(0, choice.logprobs_summary() if choice is not None else MISSING)
        return
    if len(found) != len(completion_ids):
        yield _count_differs(len(found), len(completion_ids))
        return
    if "tokens" in choice.lists and choice.lists["tokens"] != len(completion_ids):
        yield _tokens_count_differs(choice.lists["tokens"], len(completion_ids))
    if found is choice.completion and choice.unaligned_at is not None:
        yield Violation(
            f"event {choice.unaligned_at}: choices[0] logprob arrays of unequal length "
            "(tokens / top_logprobs / token_logprobs), so positions shift",
            f"events[{choice.unaligned_at}].choices[0].logprobs",
            "arrays of one length per chunk",
            "unequal lengths",
        )
        return
    first_other = None
    if found.token_id_column is not None:
        for index in range(len(found.token_id_column)):
            given = found.token_id(index)
            if given is not None and given != completion_ids[index]:
                first_other = index
                break
    own = found.own_disagreement
    if first_other is not None and (own is None or first_other <= own[0]):
        yield _other_token(first_other, completion_ids[first_other], found.token_id(first_other))
        return
    if own is not None:
        yield _own_differs(*own)
        return
    engine = get_path(fold.nvext, "engine_data", "completion_logprobs")
    if isinstance(engine, list):
        selected = found.values()
        if not _same_logprobs(engine, selected):
            yield _engine_differs(selected, engine)


def _same_logprobs(engine: list[Any], selected: list[Any]) -> bool:
    return len(engine) == len(selected) and all(
        is_number(a) and is_number(b) and close(a, b)
        for a, b in zip(engine, selected, strict=False)
    )


def _absent_logprobs(choice_index: int, observed: Any) -> Violation:
    return Violation(
        f"choices[{choice_index}].logprobs is absent or null although logprobs were requested",
        f"choices[{choice_index}].logprobs",
        "logprobs object",
        describe(observed),
    )


def _count_differs(found: int, expected: int) -> Violation:
    return Violation(
        f"{found} selected logprobs for {expected} generated ids",
        "choices[0].logprobs",
        expected,
        found,
    )


def _tokens_count_differs(found: int, expected: int) -> Violation:
    return Violation(
        f"{found} logprob tokens for {expected} generated ids",
        "choices[0].logprobs.tokens",
        expected,
        found,
    )


def _other_token(index: int, expected: Any, observed: Any) -> Violation:
    return Violation(
        f"position {index} carries the logprob of another token",
        f"choices[0].logprobs.content[{index}].token_id",
        expected,
        observed,
    )


def _own_differs(index: int, own: float, selected: Any) -> Violation:
    return Violation(
        f"position {index}: selected logprob differs from the same token's "
        "top-logprob entry (values reordered or shifted?)",
        f"choices[0].logprobs[{index}]",
        own,
        selected,
    )


def _engine_differs(selected: list[Any], engine: list[Any]) -> Violation:
    return Violation(
        "engine_data.completion_logprobs disagrees with the selected logprobs",
        "nvext.engine_data.completion_logprobs",
        selected,
        engine,
    )


@check(contract.logprobs.FINITE_NONPOSITIVE)
def finite_nonpositive(body: Any) -> Findings:
    if isinstance(body, Folded):
        for choice_index, choice in enumerate(cast("StreamFold", body).merged_choices()):
            found = choice.positions()
            if found is not None and found.not_finite is not None:
                yield _not_finite(choice_index, *found.not_finite)
                return
        return
    choices = get_path(body, "choices")
    for choice_index, choice in enumerate(choices if isinstance(choices, list) else []):
        for index, position in enumerate(positions(choice) or []):
            bad = not_finite_nonpositive(position)
            if bad is not None:
                yield _not_finite(choice_index, index, *bad)
                return


def _not_finite(choice_index: int, index: int, label: str, value: Any) -> Violation:
    return Violation(
        f"choices[{choice_index}] position {index} {label} logprob is not a finite number <= 0",
        f"choices[{choice_index}].logprobs[{index}]",
        "finite <= 0",
        describe(value),
    )


@check(contract.logprobs.TOPK_CONSISTENT)
def topk_consistent(body: Any, k: int, greedy: bool) -> Findings:
    """At temperature 0 the selected token must also be the most likely one.

    A chat list (`logprobs.content[i].top_logprobs`) is a list of alternatives, one per token:
    vLLM and SGLang give the k most likely (real Dynamo 1.6.1 with vLLM, k = 2:
    `vllm-cpu/chat_logprobs_top_2.json`), so fewer than k is an alternative lost. The
    completions form is a dict keyed by token text: two alternatives whose text collides (byte
    tokens that each decode to U+FFFD, two spellings of one space) share a key and merge, so a
    dict may legally hold fewer than k; it must hold one."""
    choice = get_path(body, "choices", 0)
    chat = isinstance(get_path(choice, "logprobs", "content"), list)
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
        if k > 0 and len(position.top) < (k if chat else 1):
            yield Violation(
                f"position {index}: fewer top entries than requested",
                where,
                f">= {k}" if chat else ">= 1",
                len(position.top),
            )
            return
        own = own_top_value(position)
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
        if not all(is_number(value) for value in others):
            continue
        if any(a < b for a, b in itertools.pairwise(others)) and chat:
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


@check(contract.logprobs.PROMPT_ALIGNMENT)
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
        if not is_number(value) or not math.isfinite(value) or value > POSITIVE_SLACK:
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
        if not is_number(value) or not math.isfinite(value) or value > POSITIVE_SLACK:
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
