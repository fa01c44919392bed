"""The frontend's ``/metrics``: Prometheus text exposition with bounded labels.

Why it matters to RL: a trainer must be able to correlate its own identities with
Dynamo telemetry *without* high-cardinality labels (integration checklist).  So every
series here is labelled only by values from small, fixed sets (model, endpoint, status,
worker id); the ``metrics_high_cardinality`` fault adds a per-request ``request_id``
label, the classic mistake a suite should catch.

Names follow Dynamo's ``dynamo_frontend_*`` family (the recorded 1.6.1 text starts with
``dynamo_frontend_active_requests{model="toy"}``); the exact 1.6.1 set is larger.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping

CONTENT_TYPE = "text/plain; charset=utf-8"
"""As recorded from every real 1.6.1 frontend (``*/metrics_content_type.json``,
``vllm-cpu/frontend_metrics.json``): no Prometheus ``version=0.0.4`` parameter."""
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

Labels = tuple[tuple[str, str], ...]

_HELP = {
    "dynamo_frontend_active_requests": (
        "gauge",
        "Number of requests currently being handled by the frontend",
    ),
    "dynamo_frontend_inflight_requests": (
        "gauge",
        "Number of generation requests admitted to a worker and not yet finished",
    ),
    "dynamo_frontend_requests_total": ("counter", "Number of generation requests, by outcome"),
    "dynamo_frontend_request_duration_seconds": (
        "histogram",
        "Time from receiving a generation request to its end",
    ),
    "dynamo_frontend_output_tokens_total": (
        "counter",
        "Number of tokens generated, by worker",
    ),
    "dynamo_frontend_model_cancellation_total": (
        "counter",
        "Total number of requests cancelled by the client",
    ),
    "dynamo_frontend_disconnected_clients": ("gauge", "Number of disconnected clients"),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _render_labels(labels: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels)
    return "{" + inner + "}" if inner else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


class Metrics:
    """Counters, histograms and gauges of one frontend; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, Labels], float] = {}
        self._histograms: dict[tuple[str, Labels], list[float]] = {}
        self._gauges: dict[tuple[str, Labels], float] = {}

    def _add(self, name: str, labels: Labels, amount: float = 1.0) -> None:
        key = (name, labels)
        self._counters[key] = self._counters.get(key, 0.0) + amount

    def _observe(self, name: str, labels: Labels, value: float) -> None:
        # Layout: one cumulative count per bucket, then sum, then count.
        slot = self._histograms.setdefault((name, labels), [0.0] * (len(DURATION_BUCKETS) + 2))
        for i, bound in enumerate(DURATION_BUCKETS):
            if value <= bound:
                slot[i] += 1
        slot[-2] += value
        slot[-1] += 1

    def gauge_add(self, name: str, labels: Mapping[str, str], delta: float) -> None:
        key = (name, tuple(labels.items()))
        with self._lock:
            self._gauges[key] = self._gauges.get(key, 0.0) + delta

    def request_finished(
        self,
        *,
        model: str,
        endpoint: str,
        status: str,
        duration_s: float,
        request_id: str | None = None,
        rl_attempt_id: str | None = None,
    ) -> None:
        """Count one generation request; ``request_id`` and ``rl_attempt_id`` only under the
        cardinality faults."""
        labels: Labels = (("model", model), ("endpoint", endpoint), ("status", status))
        if request_id is not None:
            labels = (*labels, ("request_id", request_id))
        if rl_attempt_id is not None:
            labels = (*labels, ("rl_attempt_id", rl_attempt_id))
        with self._lock:
            self._add("dynamo_frontend_requests_total", labels)
            self._observe(
                "dynamo_frontend_request_duration_seconds",
                (("model", model), ("endpoint", endpoint)),
                duration_s,
            )

    def client_cancelled(self, *, model: str, endpoint: str) -> None:
        """A client went away before its request ended (names as in the real 1.6.1 text)."""
        with self._lock:
            self._add(
                "dynamo_frontend_model_cancellation_total",
                (("endpoint", endpoint), ("model", model)),
            )
            key = ("dynamo_frontend_disconnected_clients", ())
            self._gauges[key] = self._gauges.get(key, 0.0) + 1

    def tokens_generated(self, *, model: str, worker_id: int, tokens: int) -> None:
        if tokens <= 0:
            return
        labels: Labels = (("model", model), ("worker_id", str(worker_id)))
        with self._lock:
            self._add("dynamo_frontend_output_tokens_total", labels, tokens)

    def render(self, models: Iterable[str]) -> str:
        """The exposition text; ``models`` always get their gauges, even at zero."""
        with self._lock:
            gauges = dict(self._gauges)
            counters = dict(self._counters)
            histograms = {k: list(v) for k, v in self._histograms.items()}
        for model in models:
            for name in ("dynamo_frontend_active_requests", "dynamo_frontend_inflight_requests"):
                gauges.setdefault((name, (("model", model),)), 0.0)
        lines: list[str] = []
        for name, (kind, text) in _HELP.items():
            series = {**gauges, **counters} if kind != "histogram" else {}
            rows = sorted((labels, v) for (n, labels), v in series.items() if n == name)
            hist = sorted((labels, v) for (n, labels), v in histograms.items() if n == name)
            if not rows and not hist:
                continue
            lines.append(f"# HELP {name} {text}")
            lines.append(f"# TYPE {name} {kind}")
            for labels, value in rows:
                lines.append(f"{name}{_render_labels(labels)} {_number(value)}")
            for labels, slot in hist:
                for bound, count in zip(DURATION_BUCKETS, slot, strict=False):
                    le = (*labels, ("le", repr(float(bound))))
                    lines.append(f"{name}_bucket{_render_labels(le)} {_number(count)}")
                lines.append(
                    f"{name}_bucket{_render_labels((*labels, ('le', '+Inf')))} {_number(slot[-1])}"
                )
                lines.append(f"{name}_sum{_render_labels(labels)} {slot[-2]!r}")
                lines.append(f"{name}_count{_render_labels(labels)} {_number(slot[-1])}")
        return "\n".join(lines) + "\n"


_WORKER_HELP = {
    "dynamo_component_requests_total": (
        "counter",
        "Total number of requests processed by work handler",
    ),
    "dynamo_component_cancellation_total": (
        "counter",
        "Total number of requests cancelled by work handler",
    ),
    "dynamo_component_inflight_requests": (
        "gauge",
        "Number of requests currently being processed by work handler",
    ),
    "dynamo_component_response_bytes_total": (
        "counter",
        "Total number of bytes sent in responses by work handler",
    ),
}
# What one generated token costs on the request plane, about as the real 1.6.1 mocker's
# generate endpoint sends (272,396 bytes for 2,000 tokens).
TOKEN_RESPONSE_BYTES = 136
WEIGHT_OPERATIONS_IN_FLIGHT = "vllm:rl_weight_update_operations_in_flight"
"""vLLM's gauge of weight-transfer operations awaited (vllm/entrypoints/rl/online/metrics.py,
vllm 0.32.0), by `operation` (init, start, update, finish): the native sidecar's engine has it."""


class WorkerCounters:
    """What a worker's system server publishes about its ``generate`` endpoint, under the
    names and labels the real 1.6.1 runtime uses (``worker_id`` is the instance id in hex).

    A request counts when the frontend hands it to the worker; it is in flight until its
    generation ends; every token it generates adds to the response bytes; it counts as
    cancelled only when the client's cancellation reached the worker (an engine-side abort is
    not a cancellation of the request plane).
    """

    def __init__(self, instance_id: int, namespace: str) -> None:
        self._labels: Labels = (
            ("dynamo_component", "backend"),
            ("dynamo_endpoint", "generate"),
            ("dynamo_namespace", namespace),
            ("worker_id", f"{instance_id:x}"),
        )
        self._lock = threading.Lock()
        self._values = dict.fromkeys(_WORKER_HELP, 0)
        self._operations: dict[str, int] = {}
        """Weight-transfer operations awaited now, by vLLM's operation name; a label appears
        once its operation ran (vLLM creates the gauge lazily)."""

    def operation_started(self, operation: str) -> None:
        with self._lock:
            self._operations[operation] = self._operations.get(operation, 0) + 1

    def operation_ended(self, operation: str) -> None:
        with self._lock:
            self._operations[operation] -= 1

    def started(self) -> None:
        with self._lock:
            self._values["dynamo_component_requests_total"] += 1
            self._values["dynamo_component_inflight_requests"] += 1

    def token_sent(self) -> None:
        with self._lock:
            self._values["dynamo_component_response_bytes_total"] += TOKEN_RESPONSE_BYTES

    def ended(self, *, cancelled: bool) -> None:
        with self._lock:
            self._values["dynamo_component_inflight_requests"] -= 1
            if cancelled:
                self._values["dynamo_component_cancellation_total"] += 1

    def render(self) -> str:
        with self._lock:
            values = dict(self._values)
            operations = dict(self._operations)
        lines: list[str] = []
        for name, (kind, text) in _WORKER_HELP.items():
            lines += [
                f"# HELP {name} {text}",
                f"# TYPE {name} {kind}",
                f"{name}{_render_labels(self._labels)} {_number(values[name])}",
            ]
        if operations:
            lines += [
                f"# HELP {WEIGHT_OPERATIONS_IN_FLIGHT} Weight-transfer operations currently "
                "awaited.",
                f"# TYPE {WEIGHT_OPERATIONS_IN_FLIGHT} gauge",
                *(
                    f'{WEIGHT_OPERATIONS_IN_FLIGHT}{{operation="{operation}"}} {_number(count)}'
                    for operation, count in sorted(operations.items())
                ),
            ]
        return "\n".join(lines) + "\n"
