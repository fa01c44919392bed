"""Retries and attempt identity.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import STREAM, row

ATTEMPT_IDENTITY = row(
    "retry.attempt_identity",
    "Attempts stay identifiable across retries",
    STREAM,
    "Preserve attempt identity when retrying, because a timed-out request may have completed "
    "after the client stopped waiting and generation is not idempotent.",
    asserts="attempt identity is preserved and distinct attempts stay distinguishable",
    flipped_by=("late_response_delivered_twice", "request_id_not_echoed"),
)

ROWS = (ATTEMPT_IDENTITY,)
"""The rows in the order the matrix shows them."""
