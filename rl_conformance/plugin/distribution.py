"""One run across pytest-xdist workers (`rl-conformance run --jobs N`, or `pytest -n N` with
`-p rl_conformance.plugin`): each target's tests stay together, in order, on one worker (its
deployment's state is a sequence: a refresh changes the weights every later test sees); a worker
sends each test's record with its report and the targets it started when it finishes; the
controller folds them into the one matrix, as a serial run would.

A worker's run deadline (`--run-timeout`) is the controller's, handed over as an absolute time,
so every worker stops when the run's time is up and still reports what it did.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from typing import Any

import pytest

from ..model.matrix import TestRecord
from ..model.target import Target
from .collection import UNTARGETED_GROUP
from .forked import FORK_PARENT, FORKED_CHILD

RECORD_PROPERTY = "rl-conformance-record"
TARGETS_OUTPUT = "rl-conformance-targets"
RESTORES_OUTPUT = "rl-conformance-fleet-restores"
DEADLINE_INPUT = "rl-conformance-deadline"


def is_worker(config: pytest.Config) -> bool:
    """True in a process that runs some targets' tests for another (an xdist worker, a forked
    child)."""
    return hasattr(config, "workerinput") or config.stash.get(FORKED_CHILD, False)


def is_controller(config: pytest.Config) -> bool:
    """True in the process that distributes tests (it runs none itself)."""
    if is_worker(config):
        return False
    return config.stash.get(FORK_PARENT, False) or config.pluginmanager.hasplugin("dsession")


def target_in_nodeid(nodeid: str, target_ids: Sequence[str]) -> str:
    """The target a test id names: its parameters start with the target id (`test_x[fake-vllm]`,
    `test_y[fake-vllm-sidecar-0]`); the longest target id that fits wins."""
    opened = nodeid.find("[")
    if opened < 0 or not nodeid.endswith("]"):
        return UNTARGETED_GROUP
    parameters = nodeid[opened + 1 : -1]
    fitting = [t for t in target_ids if parameters == t or parameters.startswith(f"{t}-")]
    return max(fitting, key=len) if fitting else UNTARGETED_GROUP


def make_scheduler(config: pytest.Config, log: Any, target_ids: Sequence[str]) -> Any:
    """xdist's scope scheduling with one scope per target: a worker gets a target's tests as one
    unit, in collection order. (pytest-xdist's `--dist loadgroup` would do this from marks,
    but its group names do not reach the scheduler under pytest 9.)"""
    from xdist.scheduler import LoadScopeScheduling

    class TargetScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return target_in_nodeid(nodeid, target_ids)

    return TargetScheduling(config, log)


def attach_record(report: pytest.TestReport, record: TestRecord, area: str) -> None:
    report.user_properties.append((RECORD_PROPERTY, {"record": record.to_json(), "area": area}))


def records_in(report: pytest.TestReport) -> list[tuple[TestRecord, str]]:
    """The records a report carries: its test's, then any earlier test's it amended (a worker
    found dead charged to the test whose call killed it)."""
    return [
        (TestRecord.from_json(value["record"]), str(value.get("area", "")))
        for name, value in report.user_properties
        if name == RECORD_PROPERTY
    ]


def publish_targets(config: pytest.Config, targets: list[Target]) -> None:
    """The targets this worker reached, for the controller's matrix."""
    config.workeroutput[TARGETS_OUTPUT] = [target.describe() for target in targets]  # type: ignore[attr-defined]


def publish_restores(config: pytest.Config, restores: list[dict[str, Any]]) -> None:
    """The workers this worker process put back (`WorkerRestore.to_json`), for the controller."""
    config.workeroutput[RESTORES_OUTPUT] = restores  # type: ignore[attr-defined]


def restores_reported(node: Any) -> list[dict[str, Any]]:
    output = getattr(node, "workeroutput", None) or {}
    return list(output.get(RESTORES_OUTPUT, []))


def targets_reported(node: Any) -> list[Target]:
    output = getattr(node, "workeroutput", None) or {}
    return [Target.from_description(document) for document in output.get(TARGETS_OUTPUT, [])]


def hand_over_deadline(node: Any, deadline_epoch: float | None) -> None:
    if deadline_epoch is not None:
        node.workerinput[DEADLINE_INPUT] = deadline_epoch


def seconds_left(config: pytest.Config) -> float | None:
    """A worker's remaining run time, from the deadline the controller handed over."""
    deadline = getattr(config, "workerinput", {}).get(DEADLINE_INPUT)
    return None if deadline is None else max(0.1, float(deadline) - time.time())


def interrupt_workers(nodes: Sequence[Any]) -> None:
    """Pass an interrupt of the controller on to its workers (a signal sent to the controller
    alone, `--run-timeout`): each stops its test, stops its deployments and reports, instead of
    being killed after xdist's shutdown timeout with its deployments still running."""
    for node in nodes:
        process = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
        if process is None or process.poll() is not None:
            continue
        try:
            os.kill(process.pid, signal.SIGINT)
        except OSError:
            continue
