"""Hypothesis strategies shared by the suites: request shapes a rollout client really sends.

Token ids are drawn from `prompts.SUITE_IDS`, as every prompt the suite builds.
"""

from __future__ import annotations

from hypothesis import strategies as st

from .prompts import SUITE_IDS

SAFE_TOKEN_IDS = st.integers(min_value=SUITE_IDS[0], max_value=SUITE_IDS[-1])
WORDS = st.sampled_from(
    [
        "the",
        "policy",
        "reward",
        "token",
        "rollout",
        "value",
        "trainer",
        "step",
        "gradient",
        "sample",
        "model",
        "update",
    ]
)

prompt_ids = st.lists(SAFE_TOKEN_IDS, min_size=2, max_size=12)
prompt_text = st.lists(WORDS, min_size=1, max_size=8).map(" ".join)
max_tokens = st.integers(min_value=1, max_value=10)
top_k = st.integers(min_value=0, max_value=5)
routes = st.sampled_from(["completions", "chat"])
