"""Hypothesis strategies shared by the suites: request shapes a rollout client really sends.

Token ids are drawn from [300, 2000): valid in every tokenizer we target (special tokens live at
the very bottom or the very top of real vocabularies) and in the real Dynamo mocker's vocabulary.
"""

from __future__ import annotations

from hypothesis import strategies as st

SAFE_TOKEN_IDS = st.integers(min_value=300, max_value=1999)
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
