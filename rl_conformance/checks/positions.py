"""Where a response carries its logprobs, read the same way by the whole-body checks (`logprobs`)
and by the stream fold (`stream_fold`): one `Position` per generated token, whatever the format,
and the judgements both make of one position. Shared by the two, so neither imports the other."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .base import MISSING, get_path

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
        return [content_position(entry) for entry in content]
    values = logprobs.get("token_logprobs")
    if not isinstance(values, list):
        return None
    raw_tokens, raw_tops = logprobs.get("tokens"), logprobs.get("top_logprobs")
    tokens: list[Any] = raw_tokens if isinstance(raw_tokens, list) else []
    tops: list[Any] = raw_tops if isinstance(raw_tops, list) else []
    return [
        completion_position(
            value,
            tokens[index] if index < len(tokens) else MISSING,
            tops[index] if index < len(tops) else None,
        )
        for index, value in enumerate(values)
    ]


def content_position(entry: Any) -> Position:
    """One entry of a chat choice's `logprobs.content`."""
    entry = entry if isinstance(entry, dict) else {}
    top = entry.get("top_logprobs")
    pairs = (
        [(item.get("token"), item.get("logprob")) for item in top if isinstance(item, dict)]
        if isinstance(top, list)
        else None
    )
    return Position(entry.get("token"), entry.get("logprob", MISSING), entry.get("token_id"), pairs)


def completion_position(value: Any, token: Any, top: Any) -> Position:
    """Position `i` of a completions choice: `token_logprobs[i]`, `tokens[i]`, `top_logprobs[i]`."""
    return Position(token, value, None, list(top.items()) if isinstance(top, dict) else None)


def close(left: float, right: float) -> bool:
    return math.isclose(left, right, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)


def is_number(value: Any) -> bool:
    return type(value) is float or (isinstance(value, int | float) and not isinstance(value, bool))


def own_top_disagreement(position: Position) -> float | None:
    """The token's own top-logprob value when it differs from the selected value, else None."""
    own = own_top_value(position)
    if own is not None and is_number(position.logprob) and not close(own, position.logprob):
        return own
    return None


def own_top_value(position: Position) -> float | None:
    if position.top is None or position.token is MISSING:
        return None
    for token, value in position.top:
        if token == position.token and is_number(value):
            return float(value)
    return None


def not_finite_nonpositive(position: Position) -> tuple[str, Any] | None:
    """The first of a position's logprobs (selected, then each top entry) that is not a finite
    number <= 0, with its label; None when all are."""
    if not _finite_nonpositive(position.logprob):
        return "selected", position.logprob
    for token, value in position.top or ():
        if not _finite_nonpositive(value):
            return f"top[{token!r}]", value
    return None


def _finite_nonpositive(value: Any) -> bool:
    return is_number(value) and math.isfinite(value) and value <= POSITIVE_SLACK
