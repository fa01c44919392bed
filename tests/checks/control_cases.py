"""Faithful and violating observations of the control-plane checks: admin routes, pauses and
updates, namespace scope, refresh, cancellation and retries, membership, and telemetry."""

from __future__ import annotations

from collections.abc import Callable

from rl_conformance.checks import (
    CheckResult,
    admin,
    control,
    distributed,
    membership,
    pause,
    served_policy,
    straddle,
    terminal,
    trace,
)
from rl_conformance.checks.served_policy import PolicyReference

from . import bodies

Case = tuple[Callable[[], CheckResult], Callable[[], CheckResult]]


def _stop_round(departed: int, listed_after: int) -> membership.StopRound:
    ok = pause.Answer("the stop", 200, {"status": "ok"}, None, True, True)
    return membership.StopRound(
        control="memory release",
        stop_route="release_memory_occupation",
        restore_route="resume_memory_occupation",
        stopped_workers=1,
        stops=[ok],
        listed_before=2,
        departed=departed,
        bound_s=30.0,
        restores=[ok],
        listed_after=listed_after,
    )


def _trail(events: list[tuple[str, str]]) -> straddle.VersionTrail:
    """A two-event native stream read up to its first event before the update: each pair is
    (the event's weight_version, the version its span gives the event's one token)."""
    payloads = [
        {
            "output_ids": list(range(position + 1)),
            "meta_info": {
                "weight_version": version,
                "weight_versions": [
                    {"version": spanned, "start": index, "end": index + 1}
                    for index, (_, spanned) in enumerate(events[: position + 1])
                ],
            },
        }
        for position, (version, _) in enumerate(events)
    ]
    return straddle.trail_from_native_events(payloads, 1)


REFERENCE = PolicyReference(
    checkpoint="/checkpoints/b",
    prompt=(3, 4),
    completion_ids=(5, 7, 9),
    completion_logprobs=(-1.0, -0.5, -2.0),
    margins=(0.8, 0.4, 1.1),
    prompt_logprobs=(None, -3.0),
)


def _joined(*, with_headers: bool) -> trace.TraceJoin:
    attempt = trace.Attempt("rollout-1", "attempt-1", "policy-2")
    headers = attempt.headers() if with_headers else {}
    rows = [
        {
            "event_type": "request_payload",
            "payload": {"request_id": "r-1", "http_request_headers": headers},
        },
        {"event_type": "request_end", "request": {"request_id": "r-1"}},
    ]
    return trace.join_attempts([attempt], rows)


def _versioned(reported: str) -> distributed.VersionedUpdate:
    route = "update_weights_from_distributed"
    update = distributed.call("vllm", "update", route, 200, {"status": "ok", "version": "v2"})
    return distributed.VersionedUpdate("vllm", "worker 1", (update,), "v2", reported)


CASES: dict[str, Case] = {
    "admin.route_negotiation": (
        lambda: admin.route_negotiation(bodies.discovery()["workers"][0], ["liveness_probe"]),
        lambda: admin.route_negotiation(
            bodies.discovery()["workers"][0], ["update_weights_from_disk"]
        ),
    ),
    "admin.update_taken_while_holding": (
        lambda: admin.update_taken_while_holding(
            "sglang", "control/update_weights_from_disk", None, None
        ),
        lambda: admin.update_taken_while_holding(
            "sglang", "control/update_weights_from_disk", 200, {"success": False, "message": "m"}
        ),
    ),
    "admin.success_semantics": (
        lambda: admin.success_semantics("vllm", "pause_generation", 200, {"status": "ok"}),
        lambda: admin.success_semantics(
            "vllm", "update_weights_from_disk", 200, {"status": "error", "message": "not paused"}
        ),
    ),
    "admin.unknown_route": (
        lambda: admin.unknown_route(404, {"error": "Route not found", "message": "Route /x"}),
        lambda: admin.unknown_route(200, {"status": "ok"}),
    ),
    "namespace.scope": (
        lambda: control.namespace_scope(
            {"DYN_NAMESPACE_PREFIX": "ns"},
            ["ns", "ns-a1", "ns2"],
            {"namespace": "ns", "workers": [{"namespace": "ns"}, {"namespace": "ns-a1"}]},
        ),
        lambda: control.namespace_scope(
            {"DYN_NAMESPACE_PREFIX": "ns"},
            ["ns", "ns-a1", "ns2"],
            {"namespace": "ns", "workers": [{"namespace": "ns"}, {"namespace": "ns2"}]},
        ),
    ),
    "refresh.pause_gates": (
        lambda: control.pause_gates(0, True, 0.6),
        lambda: control.pause_gates(3, True, 0.6),
    ),
    "refresh.pause_default_mode": (
        lambda: control.pause_default_mode("vllm-sidecar", "abort", "abort"),
        lambda: control.pause_default_mode("vllm-sidecar", "abort", "keep"),
    ),
    "refresh.version_verified": (
        lambda: control.version_verified("v2", {"w0": "v2"}),
        lambda: control.version_verified("v2", {"w0": "v1"}),
    ),
    "refresh.post_update_generation": (
        lambda: control.post_update_generation([1, 2], [3, 4], "v2", "v2"),
        lambda: control.post_update_generation([1, 2], [1, 2], "v2", "v2"),
    ),
    "refresh.served_policy_verified": (
        lambda: served_policy.served_policy([5, 7, 9], [-1.0, -0.5, -2.0], [None, -3.0], REFERENCE),
        lambda: served_policy.served_policy([5, 8, 9], [-1.0, -0.5, -2.0], [None, -3.0], REFERENCE),
    ),
    "refresh.inflight_weights_named": (
        lambda: control.version_is_one_of("v1", ["v1", "v2"]),
        lambda: control.version_is_one_of("v0", ["v1", "v2"]),
    ),
    "refresh.kv_invalidation": (
        lambda: control.kv_invalidation(16, 0),
        lambda: control.kv_invalidation(16, 16),
    ),
    "cancel.propagated": (
        lambda: control.cancellation_propagated(0.01, 0, 0.1),
        lambda: control.cancellation_propagated(1.0, 0, 2.0),
    ),
    "retry.attempt_identity": (
        lambda: control.attempt_identity("a", "a", ["cmpl-1", "cmpl-2"]),
        lambda: control.attempt_identity("a", "a", ["cmpl-1", "cmpl-1"]),
    ),
    "retry.late_completion_detected": (
        lambda: control.late_completion_detected(1),
        lambda: control.late_completion_detected(2),
    ),
    "telemetry.bounded_labels": (
        lambda: control.bounded_labels(
            'x_total{model="toy"} 1\n', 'x_total{model="toy"} 9\n', ["r1"], 4
        ),
        lambda: control.bounded_labels(
            'x_total{model="toy"} 1\n', 'x_total{model="toy",request_id="r1"} 1\n', ["r1"], 4
        ),
    ),
    "refresh.abort_reported": (
        lambda: terminal.abort_reported(6, terminal.Ending("stop", [5, 7], None, "cancelled")),
        lambda: terminal.abort_reported(6, terminal.Ending("stop", [5, 7], None, "stop")),
    ),
    "admin.invalid_pause_mode": (
        lambda: pause.invalid_mode_refused(
            "vllm", "pause_generation", "drain", 200, {"status": "error", "message": "drain?"}, True
        ),
        lambda: pause.invalid_mode_refused(
            "vllm", "pause_generation", "drain", 200, {"status": "ok"}, True
        ),
    ),
    "admin.pause_cycles": (
        lambda: pause.pause_cycle_answered(
            [pause.Answer("pause", 200, {"status": "ok"}, None, True, True)], True
        ),
        lambda: pause.pause_cycle_answered(
            [pause.Answer("pause", None, None, "no response within 10 s", False, False)], True
        ),
    ),
    "admin.unpaused_update_refused": (
        lambda: pause.unpaused_update_refused(
            "vllm", "update_weights_from_disk", 200, {"status": "error"}, "v1", "v2"
        ),
        lambda: pause.unpaused_update_refused(
            "vllm", "update_weights_from_disk", 200, {"status": "ok"}, "v2", "v2"
        ),
    ),
    "admin.distributed_update": (
        lambda: distributed.versioned_update(_versioned("v2")),
        lambda: distributed.versioned_update(_versioned("v1")),
    ),
    "discovery.departure_visible": (
        lambda: membership.departure_visible(membership.Departure(30.0, 2, 1, 2, 1)),
        lambda: membership.departure_visible(membership.Departure(30.0, 2, 1, 2, 2)),
    ),
    "admin.stopped_worker_unrouted": (
        lambda: membership.stopped_worker_unrouted([_stop_round(departed=1, listed_after=2)]),
        lambda: membership.stopped_worker_unrouted([_stop_round(departed=0, listed_after=2)]),
    ),
    "refresh.straddle_reported": (
        lambda: straddle.straddle_reported(_trail([("a", "a"), ("b", "b")]), "a", "b"),
        lambda: straddle.straddle_reported(_trail([("b", "b"), ("b", "b")]), "a", "b"),
    ),
    "telemetry.trace_correlation": (
        lambda: trace.trace_correlation(_joined(with_headers=True)),
        lambda: trace.trace_correlation(_joined(with_headers=False)),
    ),
}
