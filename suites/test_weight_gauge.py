"""vLLM's weight-transfer gauge, read from each selected worker's `/metrics` once a weight update
succeeded and once an update step was refused (`checks.weight_gauge`). Where no worker publishes
the gauge (vLLM creates it in its online RL API, which the Python worker path does not mount),
the row is unobservable."""

from __future__ import annotations

import pytest

from rl_conformance import FeatureAbsent, Unobservable, contract
from rl_conformance.checks import pause, weight_gauge
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import Selection, apply_update, select
from rl_conformance.control.fleet import scrape
from rl_conformance.control.weights import WeightSource
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating
ANSWER_S = 10.0
NOT_STAGED = (
    "a cancelled operation is not staged: it needs a transfer step awaiting a trainer's "
    "tensors, which no deployment here sends"
)


@capability(contract.telemetry.WEIGHT_UPDATE_GAUGE)
def test_the_weight_update_gauge_returns_to_zero(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """A full refresh, then the transfer's update step sent alone (no update started: refused):
    after each, every worker's `vllm:rl_weight_update_operations_in_flight` is 0 for every
    operation it names."""
    if rl_target.backend != "vllm":
        raise FeatureAbsent(f"{rl_target.backend} has no vLLM weight-transfer gauge")
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    apply_update(rl_verdict, rl_admin, chosen, rl_weights)
    after_success = readings(rl_client, chosen)
    if all(reading is None for reading in after_success.values()):
        raise Unobservable(
            f"no selected worker's /metrics has {weight_gauge.GAUGE} after a weight update: "
            f"vLLM's online RL API exports it (vllm 0.32+); the {chosen.family.name} family's "
            "worker path does not"
        )
    judge(rl_verdict, "a successful weight update", after_success)
    refused = refused_step(rl_admin, chosen, rl_weights)
    if refused is not None:
        judge(rl_verdict, f"a refused {refused}", readings(rl_client, chosen))
    rl_verdict.measure(weight_update_gauge={"after_failure": refused, "cancellation": NOT_STAGED})
    silent = sorted(worker for worker, reading in after_success.items() if reading is None)
    if refused is None or silent:
        raise Unobservable(
            "; ".join(
                ([f"{', '.join(silent)}: no {weight_gauge.GAUGE} series"] if silent else [])
                + (
                    [f"the {chosen.family.name} family's update is one step: no step to refuse"]
                    if refused is None
                    else []
                )
            )
            + " (what was read is judged)"
        )


def readings(rl_client: Client, chosen: Selection) -> dict[str, dict[str, float] | None]:
    found = {}
    for worker in chosen.workers:
        assert worker.system_url is not None
        samples = scrape(rl_client, worker.system_url)
        found[worker.label] = None if samples is None else weight_gauge.in_flight(samples)
    return found


def judge(rl_verdict: Verdict, after: str, found: dict[str, dict[str, float] | None]) -> None:
    for worker, reading in found.items():
        if reading is not None:
            rl_verdict.check(weight_gauge.gauge_settled(after, reading, worker))


def refused_step(rl_admin: AdminClient, chosen: Selection, rl_weights: WeightSource) -> str | None:
    """A transfer's update step sent with no update started, on every selected worker: what it
    was (None when the family's update is one step). An engine that takes it anyway is not
    judged here."""
    calls = chosen.family.update_calls(rl_weights.new(chosen.family, chosen.workers))
    steps = calls[1:-1]
    if not steps:
        return None
    step = steps[0]
    for worker, exchange in zip(
        chosen.workers,
        rl_admin.call_each(chosen.workers, step.route, dict(step.body), deadline_s=ANSWER_S),
        strict=True,
    ):
        if pause.succeeded(chosen.family.name, step.route, exchange.status, exchange.reply()):
            raise Unobservable(f"{worker.label} took {step.route} with no update started")
    return f"{step.route} with no update started"
