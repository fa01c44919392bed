"""Probes that may end a worker (`@pytest.mark.may_end_worker`) run after every other test of
their target: in a serial run (`--jobs 1`), in each group of the default parallel run (a group
is a deployment of its own) and in pytest-xdist's scope per target; the run names them before its
first test, and `--skip-crash-probes` leaves them out, each skipped naming the flag."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rl_conformance.launchers.run_plan import plan_run
from rl_conformance.model.config import RunConfig
from rl_conformance.plugin import balance, collection, crash_probes
from rl_conformance.plugin.distribution import target_in_nodeid
from rl_conformance.plugin.runner import run, suites_dir
from rl_conformance.reports import console

CRASH_PROBES = {
    "test_an_invalid_pause_mode_is_refused_and_changes_nothing": "admin.invalid_pause_mode",
    "test_pauses_and_resumes_sent_twice_or_at_once_are_all_answered": "admin.pause_cycles",
    "test_a_stopped_worker_leaves_routing_until_restored": "admin.stopped_worker_unrouted",
    "test_a_sample_held_across_an_update_names_the_versions_of_its_tokens": (
        "refresh.straddle_reported"
    ),
    "test_streams_in_flight_across_a_refresh_end_in_one_terminal_state": (
        "refresh.inflight_terminal"
    ),
}
"""The reviewed probes: an invalid pause mode and an update while an in-place pause holds a
running request end a real SGLang 0.5.21 worker (fixtures/KNOWN_DIFFERENCES.md), so does a
memory release unless the scheduler is idle (SGLang's `release_memory_occupation` asserts it),
and a second pause may never return (FastDeploy #7825)."""


def mark_of(name: str, reason: str | None) -> Any:
    return SimpleNamespace(name=name, args=() if reason is None else (reason,), kwargs={})


class Item:
    """What ordering and grouping read of a collected test."""

    def __init__(self, target: str, module: str, name: str, *marks: str) -> None:
        self.callspec = SimpleNamespace(params={"rl_target": target})
        self.path = Path("suites") / module
        self.name = self.originalname = name
        self.nodeid = f"{module}::{name}[{target}]"
        self.marks = {
            mark: mark_of(mark, "it may" if mark == collection.ENDS_WORKER else None)
            for mark in marks
        }

    def iter_markers(self, name: str) -> Iterator[Any]:
        return iter([self.marks[name]] if name in self.marks else [])

    def get_closest_marker(self, name: str) -> Any:
        return self.marks.get(name)


def ordered(items: list[Any], targets: list[str]) -> list[str]:
    config: Any = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: None))
    collection.select_and_order(config, items, set(), targets)
    return [item.name for item in items]


def test_a_probe_that_may_end_a_worker_runs_after_every_other_test_of_its_target() -> None:
    ending, mutating = collection.ENDS_WORKER, "mutating"
    items = [
        Item("b", "test_pause_control.py", "b_invalid_mode", mutating, ending),
        Item("a", "test_pause_control.py", "a_invalid_mode", mutating, ending),
        Item("a", "test_refresh_gating.py", "a_gates", mutating),
        Item("a", "test_discovery.py", "a_schema"),
        Item("b", "test_membership.py", "b_release", mutating, ending),
        Item("a", "test_weight_gauge.py", "a_gauge", mutating),
        Item("b", "test_streaming.py", "b_stream"),
    ]
    assert ordered(items, ["a", "b"]) == [
        "a_schema",
        "a_gates",
        "a_gauge",
        "a_invalid_mode",
        "b_stream",
        "b_invalid_mode",  # two probes keep their collection order
        "b_release",
    ]


def test_a_mark_without_its_reason_is_refused() -> None:
    item = Item("a", "test_x.py", "x")
    item.marks[collection.ENDS_WORKER] = mark_of(collection.ENDS_WORKER, None)
    with pytest.raises(pytest.UsageError, match="needs the reason"):
        ordered([item], ["a"])


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The real suites as a run orders them on two fakes (a dry run: nothing starts)."""
    directory = tmp_path_factory.mktemp("plan")
    config = RunConfig(dry_run=True, report_dir=str(directory), fake=("sglang", "vllm"))
    run(plan_run(config), verbosity="quiet")
    tests: list[dict[str, Any]] = json.loads((directory / "plan.json").read_text())["tests"]
    return tests


def is_probe(nodeid: str) -> bool:
    return nodeid.split("::")[1].split("[")[0] in CRASH_PROBES


def assert_probes_last(nodeids: list[str]) -> None:
    """In one process's order for one deployment: no other test after a probe."""
    first = next((i for i, nodeid in enumerate(nodeids) if is_probe(nodeid)), len(nodeids))
    assert all(is_probe(nodeid) for nodeid in nodeids[first:]), nodeids[first:]


def test_in_a_serial_run_the_probes_are_each_targets_last(planned: list[dict[str, Any]]) -> None:
    for target in ("fake-sglang", "fake-vllm"):
        nodeids = [test["nodeid"] for test in planned if test["target"] == target]
        assert {name for name in CRASH_PROBES if any(name in n for n in nodeids)} == set(
            CRASH_PROBES
        )
        assert_probes_last(nodeids)
        # pytest-xdist gets each target's tests as one scope, in this order
        assert {target_in_nodeid(n, ["fake-sglang", "fake-vllm"]) for n in nodeids} == {target}


def test_in_the_default_parallel_run_each_group_runs_its_probes_last(
    planned: list[dict[str, Any]],
) -> None:
    items = [
        Item(test["target"], test["nodeid"].split("::")[0], test["nodeid"].split("::")[1])
        for test in planned
    ]
    for item, test in zip(items, planned, strict=True):
        item.nodeid = test["nodeid"]
    groups = balance.balanced_groups(items, {"fake-sglang", "fake-vllm"})
    assert len(groups) > 2  # the fakes are split: each group a deployment of its own
    with_probes = [group for group in groups if any(is_probe(i.nodeid) for i in group)]
    assert with_probes
    for group in groups:
        assert_probes_last([item.nodeid for item in group])


def test_a_controller_holding_test_ids_only_reads_each_probe_from_its_marks(
    planned: list[dict[str, Any]],
) -> None:
    """Under pytest-xdist the controller announces from the ids its workers collected."""
    root = suites_dir()
    found = {
        test["nodeid"].split("::")[1].split("[")[0]: crash_probes.declared_probe(
            root, test["nodeid"]
        )
        for test in planned
    }
    probes = {name: probe for name, probe in found.items() if probe is not None}
    assert {name: probe.capability for name, probe in probes.items()} == CRASH_PROBES
    assert all("SGLang 0.5.21" in p.reason or "FastDeploy" in p.reason for p in probes.values())
    assert crash_probes.declared_probe(root, "test_gone.py::test_x[fake-vllm]") is None


def test_the_announcement_names_each_probe_and_the_flag() -> None:
    probes = [("admin.invalid_pause_mode", "an invalid mode"), ("admin.pause_cycles", "twice")]
    lines = console.crash_probe_lines(
        probes, ["external-sglang"], flag=crash_probes.FLAG, left_out=False, width=100
    )
    assert lines == [
        "2 probes may end the worker they are sent to: run after every other test of "
        "external-sglang",
        "  (--skip-crash-probes leaves them out)",
        "  - admin.invalid_pause_mode: an invalid mode",
        "  - admin.pause_cycles: twice",
    ]
    left = console.crash_probe_lines(probes[:1], [], flag=crash_probes.FLAG, left_out=True)
    assert left[0].startswith("left out by --skip-crash-probes: 1 probe that may end a worker")
    assert console.crash_probe_lines([], ["x"], flag=crash_probes.FLAG, left_out=False) == []


def test_a_left_out_probe_is_skipped_naming_the_flag() -> None:
    item: Any = Item("a", "test_x.py", "x", collection.ENDS_WORKER)
    added: list[pytest.MarkDecorator] = []
    item.add_marker = added.append
    crash_probes.leave_out([item, Item("a", "test_y.py", "y")])
    (skip,) = added
    reason = skip.kwargs["reason"]
    assert reason.startswith("left out by --skip-crash-probes: it may end the worker, it may")
    assert console.cover_of(reason) == "run without --skip-crash-probes to judge it"


def run_cli(directory: Path, *arguments: str) -> tuple[dict[str, Any], str]:
    command = [sys.executable, "-m", "rl_conformance", "run", "--report-dir", str(directory)]
    done = subprocess.run(
        [*command, "--examples", "2", *arguments], capture_output=True, text=True, timeout=600
    )
    assert (directory / "matrix.json").exists(), done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads((directory / "matrix.json").read_text()), done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [None, "1"], ids=["default-parallel", "jobs-1"])
def test_a_worker_a_probe_ends_blanks_only_the_probes_after_it(
    tmp_path: Path, jobs: str | None
) -> None:
    """Our fake SGLang answering an invalid pause mode 200 ok and then dying, as SGLang 0.5.21
    does: every row but the probes' is judged as on the clean fake; the probe that killed the
    worker fails naming the death, and only probes run after it on that deployment are "not
    run". About 10 s a run."""
    matrix, stdout = run_cli(
        tmp_path,
        "--fake",
        "sglang",
        "--fault",
        "sglang_invalid_pause_mode_crashes",
        *(["--jobs", jobs] if jobs else []),
    )
    assert stdout.index("may end the worker they are sent to") < stdout.index("fake-sglang: ")
    cells = {row["id"]: row["cells"]["fake-sglang"] for row in matrix["capabilities"]}
    invalid = cells["admin.invalid_pause_mode"]
    assert invalid["outcome"] == "fail"
    assert any("died after pause_generation" in e["message"] for e in invalid["evidence"])
    not_run = {c for c, cell in cells.items() if cell["reason"].startswith("not run:")}
    assert not_run <= set(CRASH_PROBES.values()), not_run
    assert not {c for c, cell in cells.items() if cell["outcome"] in ("fail", "error")} - {
        "admin.invalid_pause_mode"
    }
