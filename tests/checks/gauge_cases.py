"""Faithful and violating readings of vLLM's weight-transfer gauge, as its /metrics text reads
(vllm/entrypoints/rl/online/metrics.py: one series per operation)."""

from __future__ import annotations

from collections.abc import Callable

from rl_conformance.checks import CheckResult, weight_gauge
from rl_conformance.wire import prometheus

Case = tuple[Callable[[], CheckResult], Callable[[], CheckResult]]


def page(update: int) -> str:
    gauge = weight_gauge.GAUGE
    return "\n".join(
        [
            f"# HELP {gauge} Weight-transfer operations currently awaited.",
            f"# TYPE {gauge} gauge",
            f'{gauge}{{operation="finish"}} 0.0',
            f'{gauge}{{operation="start"}} 0.0',
            f'{gauge}{{operation="update"}} {update}.0',
        ]
    )


def settled(update: int) -> CheckResult:
    reading = weight_gauge.in_flight(prometheus.parse(page(update)))
    assert reading is not None
    return weight_gauge.gauge_settled("a refused update step", reading, "worker 1")


CASES: dict[str, Case] = {
    "telemetry.weight_update_gauge": (lambda: settled(0), lambda: settled(1)),
}
