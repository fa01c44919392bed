"""Request migration after a worker fails.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import STREAM, row

CONTINUITY = row(
    "migration.continuity",
    "A stream whose worker died continues elsewhere with no id lost or repeated",
    STREAM,
    "Treat a streaming request as a state machine: accepted, streaming, terminal success, "
    "canceled, or failed. Admit only a verified terminal result. (Dynamo's request migration "
    "guide, https://docs.nvidia.com/dynamo/dev/kubernetes/fault-tolerance/request-migration: "
    "with --migration-limit above 0, a request whose worker fails mid-generation continues on a "
    "healthy worker from the exact point of failure, no tokens lost or duplicated, and no "
    "interruption visible to the client.)",
    asserts="a stream whose worker died is continued on another worker with no id lost or repeated",
    flipped_by=("migration_repeats_splice_token",),
)

ROWS = (CONTINUITY,)
"""The rows in the order the matrix shows them."""
