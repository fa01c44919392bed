"""Cancellation.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import STREAM, row

PROPAGATION = row(
    "cancel.propagation",
    "A client's cancellation reaches the engine",
    STREAM,
    "Dynamo propagates supported cancellations and serving failures.",
    flipped_by=("cancellation_not_propagated",),
)

ROWS = (PROPAGATION,)
"""The rows in the order the matrix shows them."""
