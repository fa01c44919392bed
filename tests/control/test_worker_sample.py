"""A control effect the spec does not ask of every worker is judged on a sample of the selected
workers, the same on every night (first, last, spread between by identity); what it asks of
every worker is read on each; the sample is named on the test's record and its cell's reason,
so a pass never claims a worker it did not observe."""

from __future__ import annotations

import threading
import time

import pytest

from rl_conformance.control.admin import AdminWorker
from rl_conformance.control.admin_steps import select
from rl_conformance.control.each_worker import at_once, pins, require_observed, unobserved
from rl_conformance.model.capabilities import BY_ID
from rl_conformance.model.config import ConfigurationError, RunConfig
from rl_conformance.model.matrix import Outcome, TestRecord, build_cell
from rl_conformance.model.mutations import MutationPolicy, MutationRule
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Unobservable, Verdict
from rl_conformance.model.worker_sample import DEFAULT_SIZE, WorkerSample

ROUTES = ("pause_generation", "resume_generation", "update_weights_from_disk")
VLLM = Target(id="t", backend="vllm", kind="external", frontend_url="http://f", rl_url="http://r")


def fleet(size: int) -> list[AdminWorker]:
    return [AdminWorker(100 + i, f"http://worker-{i}:9", ROUTES) for i in reversed(range(size))]


def sampled(size: int | None) -> MutationPolicy:
    return MutationPolicy(allowed=True, sample=WorkerSample(size))


def test_the_sample_is_the_first_the_last_and_spread_between_by_identity() -> None:
    chosen = select(VLLM, fleet(64), sampled(4))
    ids = [worker.instance_id for worker in chosen.judged]
    assert ids == [100, 121, 142, 163]
    assert pins(chosen) == chosen.judged and chosen.sampled
    assert pins(chosen, every=True) == chosen.workers


def test_a_fleet_no_larger_than_the_sample_is_judged_whole() -> None:
    for size in (1, 2, 4):
        chosen = select(VLLM, fleet(size), sampled(4))
        assert chosen.judged == chosen.workers and not chosen.sampled


def test_judge_every_worker_wins_over_the_sample_size() -> None:
    assert WorkerSample.of(2, every=True).size is None
    assert WorkerSample.of(None, every=False).size == DEFAULT_SIZE
    chosen = select(VLLM, fleet(64), sampled(None))
    assert pins(chosen) == chosen.workers and not chosen.sampled


def test_the_run_gives_its_sample_with_every_policy() -> None:
    config = RunConfig(
        frontend="http://f",
        rl_url="http://r",
        backend="vllm",
        allow_mutations=True,
        all_workers=True,
        worker_sample=6,
    )
    rule = MutationRule.from_config(config)
    assert rule.for_target("external", "t").sample == WorkerSample(6)
    assert rule.for_target("fake", "f").sample == WorkerSample(6)
    every = RunConfig(frontend="http://f", backend="vllm", judge_every_worker=True)
    assert MutationRule.from_config(every).for_target("fake").sample == WorkerSample(None)


def test_a_sample_of_fewer_than_two_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigurationError, match="--worker-sample: expected an integer >= 2"):
        RunConfig(frontend="http://f", backend="vllm", worker_sample=1).validate()


def test_the_sample_is_measured_and_named_in_the_cell_reason() -> None:
    chosen = select(VLLM, fleet(64), sampled(4))
    verdict = Verdict()
    require_observed(chosen, "a pause", verdict)
    fact = verdict.measured["judged_workers"]
    assert fact["judged"] == [worker.label for worker in chosen.judged] and fact["selected"] == 64
    record = TestRecord(
        nodeid="t::pause",
        capabilities=("refresh.pause_gates",),
        target_id="t",
        outcome=Outcome.PASS,
        measured=verdict.measured,
    )
    reason = build_cell(BY_ID["refresh.pause_gates"], VLLM, [record]).reason
    assert reason.startswith("1 test(s) passed; judged on 4 of 64 selected workers (sampled: ")
    assert "worker 100, worker 121, worker 142, worker 163" in reason
    assert "--judge-every-worker" in reason


def test_what_every_worker_owes_is_not_called_a_sample() -> None:
    chosen = select(VLLM, fleet(64), sampled(4))
    verdict = Verdict()
    require_observed(chosen, "the version", verdict, every=True)
    assert "judged_workers" not in verdict.measured
    whole = select(VLLM, fleet(3), sampled(4))
    require_observed(whole, "a pause", verdict)
    assert "judged_workers" not in verdict.measured


def test_an_unobservable_worker_outside_the_sample_is_not_named() -> None:
    workers = fleet(8)
    workers[3] = AdminWorker(None, "http://given:9", ROUTES)  # sorts last: sampled
    chosen = select(VLLM, workers, sampled(4))
    assert unobserved(chosen) == (workers[3],)
    with pytest.raises(Unobservable, match="worker at http://given:9"):
        require_observed(chosen, "a pause")
    workers[3] = AdminWorker(104, "http://w:9", ROUTES)
    workers.append(AdminWorker(101, "http://twin:9", ROUTES))  # a twin the sample leaves out
    chosen = select(VLLM, workers, sampled(4))
    assert unobserved(chosen) == () and unobserved(chosen, every=True) != ()


def test_the_work_of_one_step_goes_out_at_once_in_order() -> None:
    inside, most = [0], [0]
    lock = threading.Lock()

    def work(item: int) -> int:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)
        with lock:
            inside[0] -= 1
        return item * 2

    assert at_once(work, list(range(16))) == [item * 2 for item in range(16)]
    assert most[0] > 1
