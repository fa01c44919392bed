"""The ``usage`` object: prompt tokens from the engine, completion tokens counted.

vLLM and SGLang workers also report how many prompt tokens their prefix cache held
(``prompt_tokens_details.cached_tokens``), which is how a client observes that a flush or
a weight update really invalidated the cache.  The shape is the one recorded from the
1.6.1 frontend with an engine that reports it (the mocker): completions add
``audio_tokens: null`` next to ``cached_tokens``, chat does not.  TensorRT-LLM workers
report no details.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fake_backends.frontend.views import ChoiceView
from fake_backends.runtime.state import DeploymentState


def usage(
    state: DeploymentState,
    prompt_tokens: int,
    views: Sequence[ChoiceView],
    *,
    cached_tokens: int = 0,
    endpoint: str = "completions",
) -> dict[str, Any]:
    completion = sum(len(v.result.steps) for v in views)
    if state.faults.active("usage_counts_wrong"):
        completion += 1
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
    }
    if state.personality.reports_cached_tokens:
        details: dict[str, Any] = {"cached_tokens": cached_tokens}
        if endpoint == "completions":
            details = {"audio_tokens": None, **details}
        out["prompt_tokens_details"] = details
    return out
