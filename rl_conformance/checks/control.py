"""Control-plane observations: namespace scope, refresh steps, cancellation, retries, telemetry."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .. import contract
from ..wire import prometheus
from .base import Findings, Level, Violation, check, get_path
from .namespace_scope import resolve_scope

REFRESH = "Coordinate Policy Refresh"
STREAMS = "Handle Streaming and Retries"
HIGH_CARDINALITY_LABELS = frozenset(
    {
        "request_id",
        "x_request_id",
        "sample_id",
        "trace_id",
        "span_id",
        "token",
        "token_id",
        "prompt",
        "session_id",
        "attempt_id",
        "rid",
    }
)


@check(contract.namespace.SCOPE)
def namespace_scope(env: Mapping[str, str], all_namespaces: Iterable[str], body: Any) -> Findings:
    scope = resolve_scope(env)
    expected = sorted({ns for ns in all_namespaces if scope.matches(ns)})
    workers = get_path(body, "workers")
    listed = (
        sorted({str(w.get("namespace")) for w in workers if isinstance(w, dict)})
        if isinstance(workers, list)
        else []
    )
    if listed != expected:
        yield Violation(
            f"environment {dict(env)} lists the wrong namespaces",
            "workers[*].namespace",
            expected,
            listed,
        )
    if get_path(body, "namespace") != scope.label:
        yield Violation(
            "top-level namespace does not name the scope",
            "namespace",
            scope.label,
            get_path(body, "namespace"),
        )


@check(contract.refresh.PAUSE_GATES)
def pause_gates(
    delivered_while_paused: int, completed_after_resume: bool, held_s: float
) -> Findings:
    """`delivered_while_paused`: stream events a generation sent to the paused worker delivered
    during `held_s` seconds (a hold the suite sizes from the worker's own unpaused first-token
    time); `completed_after_resume`: whether generation then went on after resume."""
    if delivered_while_paused:
        yield Violation(
            f"a generation pinned to a paused worker delivered {delivered_while_paused} events "
            f"within {held_s:.2f} s, before resume",
            "pause_generation",
            "nothing until resume",
            f"{delivered_while_paused} events",
        )
    if not completed_after_resume:
        yield Violation(
            "the held generation did not complete after resume",
            "resume_generation",
            "completed",
            "not completed",
        )


@check(
    "refresh.pause_default_mode",
    title="a pause without a mode treats in-flight requests as its family documents",
    spec="Use the exact route returned by discovery or configured by the deployment, and "
    "validate request bodies against the installed backend version.",
    section="Compare vLLM and SGLang Administration",
)
def pause_default_mode(family: str, documented: str, observed: str, evidence: str = "") -> Findings:
    """`observed`: `keep` (the stream was held until resume, then ran to its end), `abort` (it
    ended early while paused), `wait` (the pause was answered only after the stream's end),
    `none` (the stream ran to its end while its worker was paused); `documented` from the
    family's upstream source (Python worker `keep`, native sidecar `abort`, as vLLM).
    `evidence`: what the stream had delivered when the pause was sent and answered."""
    if observed != documented:
        yield Violation(
            f"a {family} pause without a mode behaved as {observed!r}; clients that omit the "
            f"mode rely on the documented default{f' ({evidence})' if evidence else ''}",
            "mode",
            documented,
            observed,
        )


@check(contract.refresh.VERSION_VERIFIED)
def version_verified(expected: Any, reported: Mapping[str, Any]) -> Findings:
    for worker, version in reported.items():
        if version != expected:
            yield Violation(
                f"{worker} reports another weight version", f"{worker}.version", expected, version
            )


@check(contract.refresh.POST_UPDATE_GENERATION)
def post_update_generation(
    before: Sequence[int],
    after: Sequence[int],
    reported_version: Any = None,
    expected_version: Any = None,
) -> Findings:
    if list(before) == list(after):
        yield Violation(
            "the same prompt generates the same tokens before and after the weight "
            "update: the old weights are still serving",
            "completion_token_ids",
            "different tokens",
            list(after),
        )
    if expected_version is not None and reported_version not in (None, expected_version):
        yield Violation(
            "the response names other weights than the ones applied",
            "engine_data.weight_version",
            expected_version,
            reported_version,
        )


@check(
    "refresh.inflight_weights_named",
    title="a stream that crossed a refresh names the old or the new weights, nothing else",
    spec="Transfer and apply one target policy.",
    section=REFRESH,
)
def version_is_one_of(reported: Any, versions: Sequence[Any]) -> Findings:
    if reported is not None and reported not in versions:
        yield Violation(
            "the stream names weights that were never applied",
            "engine_data.weight_version",
            list(versions),
            reported,
        )


@check(contract.refresh.KV_INVALIDATION)
def kv_invalidation(cached_before_flush: int, cached_after_flush: int) -> Findings:
    """`cached_before_flush` > 0 is the suite's precondition: without reuse there is nothing
    to invalidate, and the observation is inconclusive rather than a violation."""
    if cached_after_flush != 0:
        yield Violation(
            f"cached prefix still reused after the cache was invalidated "
            f"({cached_before_flush} tokens cached before)",
            "usage.prompt_tokens_details.cached_tokens",
            0,
            cached_after_flush,
        )


RAN_ON_FRACTION = 0.5
"""A generation that, after its client left, still produced this share of the tokens it had
left to generate was not stopped by the cancellation."""


@check(
    "cancel.propagated",
    title="a client that leaves a stream ends its generation at the worker",
    spec="Dynamo propagates supported cancellations.",
    section=STREAMS,
)
def cancellation_propagated(
    continued_fraction: float, still_in_flight: float, waited_s: float
) -> Findings:
    """`continued_fraction`: the share of its remaining tokens the workers generated for the
    request after its client left; `still_in_flight`: generations the workers still ran
    `waited_s` seconds later, beyond those running before."""
    if continued_fraction >= RAN_ON_FRACTION:
        yield Violation(
            f"after the client left, the worker still generated {continued_fraction:.0%} of the "
            "tokens the request had left: the cancellation did not stop it",
            "dynamo_component_response_bytes_total{dynamo_endpoint=generate}",
            f"< {RAN_ON_FRACTION:.0%} of the remaining tokens",
            round(continued_fraction, 3),
        )
    if still_in_flight > 0:
        yield Violation(
            f"the abandoned generation was still in flight {waited_s:.1f} s after the client left",
            "dynamo_component_inflight_requests{dynamo_endpoint=generate}",
            0,
            still_in_flight,
        )


@check(contract.retry.ATTEMPT_IDENTITY)
def attempt_identity(sent_id: str, echoed: Any, response_ids: Sequence[Any]) -> Findings:
    if echoed != sent_id:
        yield Violation(
            "x-request-id not echoed: the attempt cannot be correlated",
            "headers.x-request-id",
            sent_id,
            echoed,
        )
    if len(set(map(str, response_ids))) != len(response_ids):
        yield Violation(
            "two attempts produced responses with the same id: a late duplicate is "
            "indistinguishable from the retry",
            "id",
            "distinct ids",
            list(response_ids),
        )


@check(
    "retry.late_completion_detected",
    level=Level.SHOULD,
    title="a response that completes after the client's deadline is visible as a possible "
    "duplicate",
    spec="A timed-out request may have completed after the client stopped waiting.",
    section=STREAMS,
)
def late_completion_detected(completed_generations: int) -> Findings:
    """`completed_generations`: generations of one attempt id (the abandoned attempt and its
    retry) that ran to completion at the workers."""
    if completed_generations > 1:
        yield Violation(
            "the attempt abandoned at the client's deadline also ran to completion: a late "
            "duplicate nobody cancelled",
            "dynamo_component_requests_total - dynamo_component_cancellation_total",
            "at most one completed generation per attempt id",
            completed_generations,
        )


def parse_series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return prometheus.series(prometheus.parse(text))


@check(contract.telemetry.BOUNDED_LABELS)
def bounded_labels(before: str, after: str, request_ids: Sequence[str], requests: int) -> Findings:
    series_after = parse_series(after)
    for name, labels in sorted(series_after):
        for label, value in labels:
            if label in HIGH_CARDINALITY_LABELS or value in request_ids:
                yield Violation(
                    f"metric {name} has a per-request label {label}={value!r}",
                    f"{name}{{{label}}}",
                    "bounded labels",
                    value,
                )
                return
    growth = len(series_after) - len(parse_series(before))
    if growth >= requests:
        yield Violation(
            f"{requests} requests added {growth} series",
            "/metrics",
            f"< {requests} new series",
            growth,
        )
