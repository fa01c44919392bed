"""Token authority: the engine's token ids reach the trainer unchanged and complete."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from .. import contract
from .base import (
    MISSING,
    Findings,
    Folded,
    Violation,
    check,
    describe,
    get_path,
    is_int_list,
)

if TYPE_CHECKING:
    from .stream_fold import StreamFold

SECTION = "Preserve Token Authority"


def _absent(field: str, body: Any) -> str:
    """Why a requested nvext field is absent; a body without any nvext points at the frontend's
    `DYN_DISABLE_FRONTEND_NVEXT`, which silently drops every requested extension field."""
    message = f"nvext.{field} absent although requested via extra_fields"
    if get_path(body, "nvext") is MISSING:
        message += (
            " (the response has no nvext at all: a frontend started with "
            "DYN_DISABLE_FRONTEND_NVEXT ignores nvext.extra_fields)"
        )
    return message


@check(contract.tokens.PROMPT_IDS_ECHO)
def prompt_ids_echo(body: Any, sent: Sequence[int]) -> Findings:
    observed = get_path(body, "nvext", "prompt_token_ids")
    if observed is MISSING:
        yield Violation(
            _absent("prompt_token_ids", body),
            "nvext.prompt_token_ids",
            list(sent),
            "(absent)",
        )
    elif observed != list(sent):
        yield Violation(
            _first_difference("prompt ids", list(sent), observed),
            "nvext.prompt_token_ids",
            list(sent),
            observed,
        )


@check(
    "tokens.prompt_ids_present",
    title="nvext.prompt_token_ids is present: a non-empty array of token ids",
    spec="Named `nvext.prompt_token_ids` returns the effective single-prompt token sequence used "
    "after preprocessing.",
    section="Know What Returns to the Trainer",
)
def prompt_ids_present(body: Any) -> Findings:
    ids = get_path(body, "nvext", "prompt_token_ids")
    if not is_int_list(ids) or not ids:
        yield Violation(
            "nvext.prompt_token_ids must be a non-empty array of integers",
            "nvext.prompt_token_ids",
            "non-empty integer array",
            describe(ids),
        )


@check(
    "tokens.completion_ids_present",
    title="nvext.completion_token_ids is present: a non-empty array of token ids",
    spec="Generated token IDs are present and contain the expected number of choices.",
    section=SECTION,
)
def completion_ids_present(body: Any) -> Findings:
    ids = get_path(body, "nvext", "completion_token_ids")
    if ids is MISSING:
        yield Violation(
            _absent("completion_token_ids", body),
            "nvext.completion_token_ids",
            "array of token ids",
            "(absent)",
        )
    elif not is_int_list(ids) or not ids:
        yield Violation(
            "nvext.completion_token_ids must be a non-empty array of integers",
            "nvext.completion_token_ids",
            "non-empty integer array",
            ids,
        )
    elif any(token < 0 for token in ids):
        yield Violation("negative token id", "nvext.completion_token_ids", ">= 0", ids)


@check(contract.tokens.CHOICE_COUNT)
def choice_count(body: Any, expected: int) -> Findings:
    choices = get_path(body, "choices")
    count = len(choices) if isinstance(choices, list) else MISSING
    if count != expected:
        yield Violation("wrong number of choices", "choices", expected, describe(count))
        return
    indices = sorted(str(choice.get("index")) for choice in choices if isinstance(choice, dict))
    if indices != sorted(str(index) for index in range(expected)):
        yield Violation(
            "choice indices are not 0..n-1", "choices[*].index", list(range(expected)), indices
        )


@check(contract.tokens.USAGE_CONSISTENT)
def usage_consistent(
    body: Any, prompt_ids: Sequence[int], completion_ids: Sequence[int]
) -> Findings:
    usage = get_path(body, "usage")
    if not isinstance(usage, dict):
        yield Violation("usage absent", "usage", "object", describe(usage))
        return
    expected = {
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": len(completion_ids),
        "total_tokens": len(prompt_ids) + len(completion_ids),
    }
    yield from usage_disagreements(usage, expected)


def usage_disagreements(
    usage: dict[str, Any],
    expected: dict[str, int],
    where: str = "usage",
    against: dict[str, str] | None = None,
) -> Findings:
    """Each count of `usage` that is not the one `expected`; `against` names what a count was
    held to (by its name; the token ids unless named)."""
    for name, value in expected.items():
        found = usage.get(name, MISSING)
        if found != value:
            said = (against or {}).get(name, "the token ids")
            yield Violation(
                f"{where}.{name} disagrees with {said}", f"{where}.{name}", value, describe(found)
            )


@check(contract.tokens.STREAM_CONCAT)
def stream_concat(chunks: Sequence[Any] | StreamFold, unary_ids: Sequence[int]) -> Findings:
    if isinstance(chunks, Folded):
        yield from _folded_stream_concat(cast("StreamFold", chunks), unary_ids)
        return
    streamed: list[int] = []
    for position, chunk in enumerate(chunks):
        delta = get_path(chunk, "nvext", "completion_token_ids")
        if delta is MISSING:
            continue
        if not is_int_list(delta):
            yield _not_an_id_array(position, delta)
            return
        streamed.extend(delta)
    if streamed != list(unary_ids):
        yield _streamed_ids_differ(unary_ids, streamed)


def _folded_stream_concat(fold: StreamFold, unary_ids: Sequence[int]) -> Findings:
    if fold.ids_error is not None:
        yield _not_an_id_array(*fold.ids_error)
        return
    if not fold.ids.equals(unary_ids):
        yield _streamed_ids_differ(unary_ids, fold.ids.tolist())


def _not_an_id_array(position: int, delta: Any) -> Violation:
    return Violation(
        f"chunk {position}: completion_token_ids is not an integer array",
        f"events[{position}].nvext.completion_token_ids",
        "integer array",
        delta,
    )


def _streamed_ids_differ(unary_ids: Sequence[int], streamed: list[Any]) -> Violation:
    return Violation(
        _first_difference("streamed ids", list(unary_ids), streamed),
        "events[*].nvext.completion_token_ids",
        list(unary_ids),
        streamed,
    )


@check(contract.tokens.TEXT_TOKEN_EQUIVALENCE)
def text_token_equivalence(from_text: Sequence[int], from_tokens: Sequence[int]) -> Findings:
    if list(from_text) != list(from_tokens):
        yield Violation(
            _first_difference("completion ids", list(from_text), list(from_tokens)),
            "nvext.completion_token_ids",
            list(from_text),
            list(from_tokens),
        )


@check(contract.tokens.MODEL_IDENTITY)
def model_identity(response_model: Any, served: str, worker_models: Sequence[str] = ()) -> Findings:
    if response_model != served:
        yield Violation(
            "response model differs from the model listed by /v1/models",
            "model",
            served,
            describe(response_model),
        )
    for position, model in enumerate(worker_models):
        if model != served:
            yield Violation(
                f"discovery worker {position} serves another model",
                f"workers[{position}].model",
                served,
                model,
            )


@check(contract.tokens.INPUT_TOKENS_ESTIMATE)
def input_tokens_estimate(body: Any) -> Findings:
    count = get_path(body, "input_tokens")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        yield Violation(
            "input_tokens must be a non-negative integer",
            "input_tokens",
            "integer >= 0",
            describe(count),
        )
    if get_path(body, "object") != "response.input_tokens":
        yield Violation(
            "object must be response.input_tokens",
            "object",
            "response.input_tokens",
            describe(get_path(body, "object")),
        )


def _first_difference(what: str, expected: list[Any], observed: Any) -> str:
    if not isinstance(observed, list):
        return f"{what}: expected a list, observed {type(observed).__name__}"
    if len(expected) != len(observed):
        return f"{what}: expected {len(expected)} ids, observed {len(observed)}"
    for position, (left, right) in enumerate(zip(expected, observed, strict=True)):
        if left != right:
            return f"{what}: first difference at position {position} ({left} != {right})"
    return f"{what} differ"


@check(
    "tokens.engine_data_agreement",
    title="engine_data.completion_token_ids, when returned, equal nvext.completion_token_ids",
    spec="Routed experts and raw engine data: Backend-specific. Prefer named fields over the raw "
    "engine payload.",
    section="Know What Returns to the Trainer",
)
def engine_data_agreement(body: Any) -> Findings:
    """Two copies of the authoritative ids must never disagree: a trainer reading the raw engine
    payload would train on other tokens than one reading the named field."""
    named = get_path(body, "nvext", "completion_token_ids")
    raw = get_path(body, "nvext", "engine_data", "completion_token_ids")
    if raw is MISSING or named is MISSING:
        return
    if raw != named:
        yield Violation(
            _first_difference("engine_data ids", named if isinstance(named, list) else [], raw),
            "nvext.engine_data.completion_token_ids",
            named,
            raw,
        )


def native_sequence(events: Sequence[Any]) -> list[int] | None:
    """The output ids of a native SGLang `/generate` stream: SGLang's default is cumulative
    `output_ids` per event, Dynamo's 1.6.1 frontend sends deltas (`fixtures/KNOWN_DIFFERENCES.md`);
    both are read. None when no event carries an id list."""
    lists = [
        get_path(event, "output_ids")
        for event in events
        if is_int_list(get_path(event, "output_ids"))
    ]
    if not lists:
        return None
    concatenated = [token for ids in lists for token in ids]
    cumulative = all(lists[k][: len(lists[k - 1])] == lists[k - 1] for k in range(1, len(lists)))
    return list(lists[-1]) if cumulative and len(lists) > 1 else concatenated


@check(
    "generate.native_ids_agree",
    title="a native generation route returns the engine ids the OpenAI route returns",
    spec="The engine token sequence used for training is authoritative.",
    section=SECTION,
)
def native_ids_agree(route: str, native: Any, openai_ids: Sequence[int]) -> Findings:
    if not is_int_list(native):
        yield Violation(
            f"{route}: no integer id list for the generated tokens",
            route,
            "the generated token ids",
            native,
        )
    elif list(native) != list(openai_ids):
        yield Violation(
            _first_difference(f"{route} ids", list(openai_ids), list(native)),
            route,
            list(openai_ids),
            list(native),
        )
