"""HTTP-level findings every exchange can produce before any contract check applies."""

from __future__ import annotations

from .base import Findings, Violation, check

SECTION = "Separate the Three Planes"


@check(
    "http.status",
    title="the deployment answers with the expected HTTP status",
    spec="Send rollout inference through the shared frontend.",
    section=SECTION,
)
def status(
    observed: int | None, expected: int, error: str | None = None, body: str = ""
) -> Findings:
    if observed is None:
        yield Violation(f"no HTTP response: {error}", "status", expected, None)
    elif observed != expected:
        yield Violation(
            f"HTTP {observed} instead of {expected}; body: {body}", "status", expected, observed
        )


@check(
    "http.json_body",
    title="the body is a JSON document",
    spec="Send rollout inference through the shared frontend.",
    section=SECTION,
)
def json_body(parse_error: str | None, raw_preview: str, what: str = "response body") -> Findings:
    if parse_error is not None:
        yield Violation(f"{what} is not valid JSON: {parse_error}", what, "JSON", raw_preview)


@check(
    "http.status_in",
    title="the deployment answers with one of the allowed HTTP statuses",
    spec="The discovery endpoint is read-only.",
    section=SECTION,
)
def status_in(observed: int | None, allowed: set[int], what: str = "") -> Findings:
    if observed not in allowed:
        yield Violation(f"unexpected status for {what}", "status", sorted(allowed), observed)


@check(
    "http.event_stream",
    title="a streaming request is answered with an event stream that carries events",
    spec="Treat a streaming request as a state machine: accepted, streaming, terminal success, "
    "canceled, or failed.",
    section="Handle Streaming and Retries",
)
def event_stream(content_type: str, events: int, body: str = "") -> Findings:
    """Without it, every per-event check of a stream holds vacuously on an answer with no
    events."""
    if "text/event-stream" not in content_type.lower():
        yield Violation(
            f"a stream was asked for, but the answer is {content_type or 'untyped'}: {body}",
            "content-type",
            "text/event-stream",
            content_type,
        )
    elif events == 0:
        yield Violation(
            f"the event stream carried no complete data event: {body}", "events", ">= 1", 0
        )
