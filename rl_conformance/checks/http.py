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
