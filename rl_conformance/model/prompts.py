"""The prompts the suite builds, held to what the deployment accepts.

Every token prompt the suite builds draws its ids from `SUITE_IDS` (the fixed prompts, the
generated ones of `strategies`, the prefix-cache prompt), and a long prompt is sized to the context
window the deployment states (`/v1/models`: Dynamo's `context_window`, vLLM's `max_model_len`).
Before any test, one single-token completion of the range's two ends proves the deployment takes
them (`launchers.plan`); a deployment whose vocabulary holds fewer ids refuses that request while
serving the range's lowest id alone, and then a refusal of a prompt the suite built is the
suite's problem, reported skipped naming why, never the deployment's failure. The same holds
for the cache prompt, whose length the suite chose: a refusal of it, where the same request
with a short prompt is served, is not judged (`SuitePromptRefused`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .verdict import Inconclusive

SUITE_IDS = range(300, 2000)
"""Ids every tokenizer the suite targets holds: real vocabularies keep their special ids at the
very bottom or the very top, and even a small model's vocabulary of 4,096 ids has these."""
CACHE_PROMPT_TOKENS = 520
"""The prefix-cache prompt's length where the context window allows it: several cache blocks of
any engine (16 to 256 tokens each), so a cached prefix is reported in whole blocks."""
CACHE_STRIDE = 7919
"""A prime stride through `SUITE_IDS`: the cache prompt repeats no short run of ids, so no other
prompt of the suite shares a prefix with it."""
REFUSAL_STATUSES = frozenset({400, 413, 422})
"""The answers that refuse a request for its content (not its route, model or method)."""
WINDOW_KEYS = ("context_window", "max_model_len")


class SuitePromptRefused(Inconclusive):
    """The deployment refused a prompt the suite built: the suite's problem, not a failure."""


@dataclass(frozen=True)
class PromptSpace:
    """What the deployment showed of the prompts it takes: the context window it states (None:
    states none), and why it refused the ends of `SUITE_IDS` (None: it took them, or was not
    asked)."""

    context_window: int | None = None
    refused: str | None = None

    def cache_prompt(self, max_tokens: int) -> list[int]:
        """The prefix-cache prompt: `CACHE_PROMPT_TOKENS` ids of `SUITE_IDS`, fewer when the
        context window leaves no room for them and `max_tokens` (at most half the window)."""
        length = CACHE_PROMPT_TOKENS
        if self.context_window is not None:
            length = max(1, min(length, self.context_window // 2, self.context_window - max_tokens))
        span = len(SUITE_IDS)
        return [SUITE_IDS[(index * CACHE_STRIDE) % span] for index in range(length)]

    def describe(self) -> dict[str, Any]:
        """The target's topology entry (`Target.topology["prompts"]`)."""
        return {
            "ids": [SUITE_IDS[0], SUITE_IDS[-1]],
            "context_window": self.context_window,
            "refused": self.refused,
        }

    @classmethod
    def of(cls, topology: dict[str, Any]) -> PromptSpace:
        """The space a target's topology recorded; an empty one where none was recorded."""
        entry = topology.get("prompts")
        if not isinstance(entry, dict):
            return cls()
        window = entry.get("context_window")
        refused = entry.get("refused")
        return cls(
            window if type(window) is int and window > 0 else None,
            refused if isinstance(refused, str) else None,
        )


def stated_context_window(models: Any, model: str | None) -> int | None:
    """The context window `/v1/models` states for `model` (`WINDOW_KEYS`); None when it states
    none (a mocker without `--max-model-len` says 0) or the body lists no such model."""
    listed = models.get("data") if isinstance(models, dict) else None
    if not isinstance(listed, list):
        return None
    for entry in listed:
        if isinstance(entry, dict) and entry.get("id") == model:
            window = next((entry[key] for key in WINDOW_KEYS if entry.get(key)), None)
            return window if type(window) is int and window > 0 else None
    return None


def ends_refused(status: int | None, preview: str, low_status: int | None) -> str | None:
    """Why the deployment does not take the suite's ids: a single-token completion of
    `SUITE_IDS`' two ends was refused for its content (`status`) while one of its lowest id alone
    was served (`low_status`). None otherwise: a deployment that refuses even that is refusing
    token prompts, which is its own failure, not the suite's."""
    if status not in REFUSAL_STATUSES or low_status != 200:
        return None
    low, high = SUITE_IDS[0], SUITE_IDS[-1]
    return (
        f"the deployment served prompt id {low} alone but refused ids {low} and {high} with "
        f"HTTP {status} ({preview}): its vocabulary holds fewer ids than the suite's prompts use "
        f"({low}..{high})"
    )


def refused_prompt(status: int | None, preview: str, what: str, short_status: int | None) -> None:
    """Raise `SuitePromptRefused` when a request the suite built (`what`) was refused for its
    prompt: it answered a refusal (`REFUSAL_STATUSES`) while the same request with a short
    prompt of the suite's ids was served (`short_status` 200). A refusal of both is about
    something else, the deployment's to answer for."""
    if status in REFUSAL_STATUSES and short_status == 200:
        raise SuitePromptRefused(
            f"the deployment refused {what} with HTTP {status} ({preview}) and served the same "
            "request with a short prompt: the suite's prompt, not judged as the deployment's "
            "failure"
        )


__all__ = [
    "CACHE_PROMPT_TOKENS",
    "REFUSAL_STATUSES",
    "SUITE_IDS",
    "PromptSpace",
    "SuitePromptRefused",
    "ends_refused",
    "refused_prompt",
    "stated_context_window",
]
