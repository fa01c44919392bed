"""The fleet's restore records across the run's processes: a restore that raised marks only the
workers it had not reached, and a record sent by another process reads as the one it made."""

from __future__ import annotations

from typing import cast

from rl_conformance.control.fleet_restore import WorkerRestore
from rl_conformance.control.fleet_state import WorkerState
from rl_conformance.launchers.run_plan import RunPlan
from rl_conformance.plugin.restore import not_restored_warnings, restore_failed
from rl_conformance.plugin.state import RunState

FIRST = WorkerState("worker 1", "http://10.0.0.1:9090", 1, "vllm")
SECOND = WorkerState("worker 2", "http://10.0.0.2:9090", 2, "vllm")


def test_a_restore_that_raised_marks_only_the_workers_it_had_not_reached() -> None:
    state = RunState(run=cast(RunPlan, None))
    state.fleet_found = {"fleet": {FIRST.system_url: FIRST, SECOND.system_url: SECOND}}
    state.fleet_restore = [WorkerRestore("fleet", FIRST, actions=["resumed"], verified=True)]
    results = restore_failed(state, RuntimeError("discovery unreadable"))
    assert [(r.before.label, r.restored) for r in results] == [
        ("worker 1", True),
        ("worker 2", False),
    ]
    assert results[1].problems == ["the restore itself failed (discovery unreadable)"]
    assert state.fleet_found == {}
    assert not_restored_warnings(state)[0].startswith("FLEET NOT RESTORED: fleet: worker 2")


def test_a_record_from_another_process_reads_as_the_one_it_made() -> None:
    made = WorkerRestore("fleet", SECOND, actions=["paused"], problems=["reload refused"])
    made.verified, made.verification = False, "the probe disagrees"
    sent = WorkerRestore.from_json(made.to_json())
    assert sent.to_json() == made.to_json()
    assert (sent.restored, sent.line()) == (made.restored, made.line())
