"""vLLM's weight-transfer gauge: `vllm:rl_weight_update_operations_in_flight{operation}` counts
the weight-transfer operations awaited now (`vllm/entrypoints/rl/online/metrics.py`, vllm
0.32.0). vLLM's own RL tests pin that it returns to 0 after a failed and after a cancelled update:
a gauge left above 0 makes a stuck update look like one still running, and hides the next real
one. Read after each operation has ended, every label must be back at 0."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .. import contract
from ..wire import prometheus
from .base import Findings, Violation, check

GAUGE = "vllm:rl_weight_update_operations_in_flight"


def in_flight(samples: Iterable[prometheus.Sample]) -> dict[str, float] | None:
    """The gauge's value per `operation` label among a /metrics page's samples; None when it has
    no series (vLLM creates it at the first operation; a worker path without vLLM's RL API has
    none)."""
    found = {
        sample.labels.get("operation", ""): sample.value
        for sample in samples
        if sample.name == GAUGE
    }
    return found or None


@check(contract.telemetry.WEIGHT_UPDATE_GAUGE)
def gauge_settled(after: str, reading: Mapping[str, float], worker: str) -> Findings:
    """`after`: which operation had just ended, and how (`a successful transfer`, `a refused
    update step`); `reading`: the gauge per operation, read then."""
    for operation, value in sorted(reading.items()):
        if value != 0:
            yield Violation(
                f"{worker}: {GAUGE}{{operation={operation!r}}} is {value:g} after {after} "
                "ended: a stuck count makes the next update look already running",
                f'{GAUGE}{{operation="{operation}"}}',
                0,
                value,
            )
