"""The ``usage`` object: prompt tokens from the engine, completion tokens counted."""

from __future__ import annotations

from collections.abc import Sequence

from fake_backends.state import DeploymentState
from fake_backends.views import ChoiceView


def usage(
    state: DeploymentState, prompt_tokens: int, views: Sequence[ChoiceView]
) -> dict[str, int]:
    completion = sum(len(v.result.steps) for v in views)
    if state.fault("usage_counts_wrong"):
        completion += 1
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
    }
