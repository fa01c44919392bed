"""Discovery scoped by namespace.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import RL_WORKERS, row

SCOPE = row(
    "namespace.scope",
    "The RL listener's namespace scope follows its environment",
    "Scope Discovery by Namespace",
    "The RL listener reads the set of Dynamo namespaces it searches from its own process "
    "environment, and from nothing else.",
    RL_WORKERS,
    asserts="the RL listener lists exactly the workers its environment scopes",
    flipped_by=("empty_prefix_global", "namespace_prefix_matches_ns2"),
)

ROWS = (SCOPE,)
"""The rows in the order the matrix shows them."""
