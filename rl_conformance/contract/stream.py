"""Streams, their terminal states and finish reasons.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import STREAM, TOKENS, row

SINGLE_TERMINAL = row(
    "stream.single_terminal",
    "Exactly one terminal event per choice",
    STREAM,
    "Treat a streaming request as a state machine: accepted, streaming, terminal success, "
    "canceled, or failed.",
    asserts="exactly one terminal event per choice",
    flipped_by=("double_terminal",),
)

NOTHING_AFTER_TERMINAL = row(
    "stream.nothing_after_terminal",
    "Nothing but usage and [DONE] after the terminal",
    STREAM,
    "Admit only a verified terminal result.",
    asserts="after a choice's terminal event only usage chunks and [DONE] follow",
    flipped_by=("content_after_terminal",),
)

DONE_LAST = row(
    "stream.done_last",
    "Streams end with data: [DONE]",
    STREAM,
    "Treat a streaming request as a state machine: accepted, streaming, terminal success, "
    "canceled, or failed.",
    asserts="the stream ends with exactly one data: [DONE]",
    flipped_by=("done_missing",),
)

FINISH_REASON = row(
    "stream.finish_reason",
    "Finish reasons are recognised",
    TOKENS,
    "The response has a terminal state recognized by the framework.",
    flipped_by=("finish_reason_missing", "stop_reason_in_choices", "unknown_finish_reason"),
)

TERMINAL_SUCCESS = row(
    "stream.terminal_success",
    "Complete streams reach verified terminal success",
    STREAM,
    "Admit only a verified terminal result.",
    asserts="a complete, well-formed stream reaches terminal success in the client's state machine",
    flipped_by=("stream_answered_unary", "stream_truncated"),
)

TERMINAL_REASON_VERIFIED = row(
    "stream.terminal_reason_verified",
    "Finish reasons are true of the returned sequence",
    "Integration Checklist",
    "Token IDs, log probabilities, masks, and terminal states match the framework contract.",
    asserts="a finish reason is true of the returned sequence and the request",
    flipped_by=("length_reported_as_stop", "matched_stop_id_dropped", "stop_string_drops_last_id"),
)

ROWS = (
    SINGLE_TERMINAL,
    NOTHING_AFTER_TERMINAL,
    DONE_LAST,
    FINISH_REASON,
    TERMINAL_SUCCESS,
    TERMINAL_REASON_VERIFIED,
)
"""The rows in the order the matrix shows them."""
