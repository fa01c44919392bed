"""Metrics and traces.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import REFRESH, RL_WORKERS, Level, row

BOUNDED_LABELS = row(
    "telemetry.bounded_labels",
    "Metrics carry no high-cardinality labels",
    "Integration Checklist",
    "Framework identity can be correlated with Dynamo telemetry without high-cardinality metric "
    "labels.",
    level=Level.SHOULD,
    asserts="metrics carry no high-cardinality labels and their series stay bounded",
    flipped_by=("metrics_high_cardinality", "metrics_rl_attempt_label"),
)

WEIGHT_UPDATE_GAUGE = row(
    "telemetry.weight_update_gauge",
    "The weight-transfer in-flight gauge returns to 0 after a successful and a refused step",
    REFRESH,
    "Keep generation gated when membership changes, an update fails, cache reset fails, or "
    "post-update generation does not pass. (vLLM's RL metrics: "
    "vllm:rl_weight_update_operations_in_flight returns to 0 after a successful, a failed and a "
    "cancelled weight-transfer operation; vllm/entrypoints/rl/online/metrics.py.)",
    RL_WORKERS,
    level=Level.SHOULD,
    asserts="the weight-transfer in-flight gauge is back to 0 once each operation ended",
    flipped_by=("weight_update_gauge_stuck",),
)

TRACE_CORRELATION = row(
    "telemetry.trace_correlation",
    "Framework attempts correlate with Dynamo's request trace",
    "Integration Checklist",
    "Framework identity can be correlated with Dynamo telemetry without high-cardinality metric "
    "labels.",
    level=Level.SHOULD,
    asserts=(
        "every framework attempt joins the request trace, and no framework identity is a metric "
        "label"
    ),
    flipped_by=("trace_stream_end_missing", "trace_stream_headers_dropped"),
)

ROWS = (BOUNDED_LABELS, WEIGHT_UPDATE_GAUGE, TRACE_CORRELATION)
"""The rows in the order the matrix shows them."""
