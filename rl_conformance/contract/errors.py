"""Refusals of invalid requests.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import row

VALIDATION = row(
    "errors.validation",
    "Invalid requests are rejected with 4xx and a flat error body",
    "Integration Checklist",
    "Request, worker, and update failures have a tested recovery path.",
    flipped_by=(
        "context_window_unchecked",
        "generation_artifact_limits_unchecked",
        "metadata_upload_refusals_reworded",
        "token_ids_wrapped",
        "validation_accepted",
    ),
)

ROWS = (VALIDATION,)
"""The rows in the order the matrix shows them."""
