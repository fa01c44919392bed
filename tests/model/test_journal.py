"""No result is lost: each record is on disk as its test finishes (`journal`), a matrix rebuilt
from a journal the run never finished says so; exit statuses mean that the thing under test
failed (`ExitRule`); a failure several requests show keeps the wire log of all of them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.certify.scenarios import SCENARIOS
from rl_conformance.certify.twins import self_check_problems
from rl_conformance.checks import schema_check
from rl_conformance.client.reproducers import replayable
from rl_conformance.errors import ConfigurationError
from rl_conformance.model import journal as journal_module
from rl_conformance.model.capabilities import BY_ID, CAPABILITIES
from rl_conformance.model.journal import JOURNAL, SYNC_INTERVAL_S, Journal, read, rebuild
from rl_conformance.model.matrix import (
    Evidence,
    ExitRule,
    Outcome,
    RunInfo,
    TestRecord,
    build_matrix,
    now,
)
from rl_conformance.model.target import Target
from rl_conformance.reports import wire_excerpt, write_reports
from rl_conformance.wire.exchange import SEQUENCE_KEPT, Exchange, WireRequest, sequence_wire_log

VLLM = Target(id="fake-vllm", backend="vllm", kind="fake", frontend_url="http://127.0.0.1:1")
SGLANG = Target(id="fake-sglang", backend="sglang", kind="fake", frontend_url="http://127.0.0.1:2")
SELECTED = [c.id for c in CAPABILITIES[:3]]


def record(
    capability: str, outcome: Outcome = Outcome.PASS, target: str = "fake-vllm"
) -> TestRecord:
    return TestRecord(f"t::{capability}[{target}]", (capability,), target, outcome, "why")


def begun(directory: Path) -> Journal:
    return Journal.begin(directory, RunInfo(now(), now(), False, 7), SELECTED, [VLLM, SGLANG])


def test_each_record_is_on_disk_when_the_call_returns(tmp_path: Path) -> None:
    journal = begun(tmp_path)
    journal.target(VLLM)
    journal.record(record(SELECTED[0]))
    lines = (tmp_path / JOURNAL).read_text().splitlines()  # read while still open
    assert [json.loads(line)["kind"] for line in lines] == ["run", "record"]
    journal.record(record(SELECTED[1], Outcome.FAIL))
    assert len((tmp_path / JOURNAL).read_text().splitlines()) == 3
    journal.close()


def test_lines_are_fsyncd_at_most_once_an_interval_and_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flushed line survives a killed process; the fsync, for a machine that goes down, is paid
    for once an interval (the run's first line at once) and for what is left at close."""
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    clock = [100.0]
    monkeypatch.setattr(journal_module.time, "monotonic", lambda: clock[0])
    journal = begun(tmp_path)
    assert len(synced) == 1  # the first line
    for capability in SELECTED:
        journal.record(record(capability))
    assert len(synced) == 1
    clock[0] += SYNC_INTERVAL_S
    journal.record(record(SELECTED[0], Outcome.FAIL))
    assert len(synced) == 2  # an interval later: this line and the ones before it
    journal.record(record(SELECTED[1]))
    journal.close()
    assert len(synced) == 3  # what was left unsynced
    assert len((tmp_path / JOURNAL).read_text().splitlines()) == 1 + len(SELECTED) + 2


def test_a_journal_the_run_never_ended_rebuilds_an_incomplete_matrix(tmp_path: Path) -> None:
    journal = begun(tmp_path)
    journal.record(record(SELECTED[0]))
    journal.record(record(SELECTED[1], Outcome.FAIL))
    journal.close()
    with open(tmp_path / JOURNAL, "a") as cut:  # the kill came in the middle of a line
        cut.write('{"kind": "record", "record": {"nodeid": "t::x", "capab')
    matrix = rebuild(tmp_path)
    assert not matrix.run.complete
    assert matrix.run.incomplete_reason == (
        "rebuilt from 2 test records: the run ended before its report "
        "(1 unreadable line(s) left out)"
    )
    assert matrix.run.seed == 7
    assert [t.id for t in matrix.targets] == ["fake-vllm", "fake-sglang"]
    assert matrix.cell(SELECTED[0], "fake-vllm").outcome is Outcome.PASS
    assert matrix.cell(SELECTED[1], "fake-vllm").outcome is Outcome.FAIL
    assert matrix.cell(SELECTED[2], "fake-vllm").reason.startswith("not reached: rebuilt from 2")
    assert matrix.exit_status == 1
    document = matrix.to_json()
    assert document["complete"] is False
    result = schema_check("matrix", document)
    assert result.passed, result.explain()


def test_a_finished_journal_rebuilds_the_same_complete_matrix(tmp_path: Path) -> None:
    journal = begun(tmp_path)
    journal.target(VLLM)
    records = [record(c) for c in SELECTED] + [record(c, target="fake-sglang") for c in SELECTED]
    for item in records:
        journal.record(item)
    info = RunInfo(journal_started(tmp_path), now(), True, 7)
    journal.end(info)
    journal.close()
    matrix = rebuild(tmp_path)
    assert matrix.run.complete and matrix.run.incomplete_reason is None
    direct = build_matrix([BY_ID[c] for c in SELECTED], [VLLM, SGLANG], records, info)
    assert matrix.to_json()["capabilities"] == direct.to_json()["capabilities"]
    assert matrix.exit_status == 0


def journal_started(directory: Path) -> Any:
    return rebuild(directory).run.started_at


def test_what_is_not_a_journal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no journal of a run"):
        rebuild(tmp_path)
    (tmp_path / JOURNAL).write_text('{"kind": "record"}\n')
    with pytest.raises(ConfigurationError, match="expected a run's journal"):
        read(tmp_path / JOURNAL)


def test_the_exit_rule_decides_what_fails_the_command() -> None:
    info = RunInfo(now(), now(), True, 0)
    records = [record(SELECTED[0], Outcome.FAIL), record(SELECTED[0], target="fake-sglang")]
    matrix = build_matrix([BY_ID[SELECTED[0]]], [VLLM, SGLANG], records, info)
    assert matrix.exit_status == 1 and "exit_rule" not in matrix.to_json()
    matrix.exit_rule = ExitRule(failing=(Outcome.ERROR,))  # a study: a fail is an answer
    assert matrix.exit_status == 0
    matrix.exit_rule = ExitRule(exempt={"fake-vllm": "meant to fail"})
    assert matrix.exit_status == 0
    document = matrix.to_json()
    assert document["exit_rule"]["exempt"] == {"fake-vllm": "meant to fail"}
    assert schema_check("matrix", document).passed
    matrix.exit_rule = ExitRule(exempt={"fake-vllm": "meant to fail"}, problems=("twin x",))
    assert matrix.exit_status == 1


class _Result:
    def __init__(self, adapter: str, scenario: str, failed: list[str]) -> None:
        self.adapter = adapter
        self.scenario = next(s for s in SCENARIOS if s.name == scenario)
        self.failed = [type("F", (), {"check_id": check})() for check in failed]
        self.error = None


def test_a_twin_is_held_to_its_reviewed_failures_over_the_scenarios_run() -> None:
    reviewed = {"retokenizes": {"iteration": ["adapter.engine_token_ids"]}}
    as_reviewed = [_Result("retokenizes", "iteration", ["adapter.engine_token_ids"])]
    chosen = [s.name for s in SCENARIOS]
    assert self_check_problems(as_reviewed, chosen, reviewed) == []  # type: ignore[arg-type]
    missed = [_Result("retokenizes", "iteration", [])]
    [problem] = self_check_problems(missed, chosen, reviewed)  # type: ignore[arg-type]
    assert problem.startswith("broken twin retokenizes failed nothing; reviewed:")
    # a scenario not run is not expected
    assert self_check_problems(missed, ["stream_cut"], reviewed) == []  # type: ignore[arg-type]


def test_the_adapter_table_keeps_whole_adapter_names() -> None:
    from rl_conformance.cli.certify_adapter import _table

    name = "examples.my_adapter:MyAdapter"
    document = {
        "targets": [{"id": name}, {"id": "reopens_after_failed_flush"}],
        "capabilities": [
            {
                "id": "adapter.single_admission",
                "cells": {
                    name: {"outcome": "pass"},
                    "reopens_after_failed_flush": {"outcome": "pass"},
                },
            }
        ],
    }
    header = _table(document).splitlines()[0]
    assert name in header and "reopens_after_failed_flush" in header


def exchange(n: int, path: str = "/v1/rl/workers") -> Exchange:
    return Exchange(
        WireRequest("GET", f"http://127.0.0.1:1{path}?n={n}", {}), status=200, body=b"{}"
    )


def test_a_failure_several_requests_show_keeps_the_wire_log_of_all_of_them(
    tmp_path: Path,
) -> None:
    steps = [exchange(n) for n in range(3)] + [exchange(3, "/engine/update_weights_from_disk")]
    wire = sequence_wire_log(steps, "# 4 request(s) of the test, in order")
    assert wire["requests"] == 4 and [s["position"] for s in wire["sequence"]] == [0, 1, 2, 3]
    assert replayable(wire) is not None and "sequence of 4 requests" in str(replayable(wire))
    assert "update_weights_from_disk?n=3 -> HTTP 200" in wire_excerpt(wire)
    failing = TestRecord(
        "t::refresh",
        ("refresh.post_update_generation",),
        "fake-vllm",
        Outcome.FAIL,
        "old weights",
        evidence=[Evidence("refresh.post_update_generation", "old weights", wire=wire)],
    )
    info = RunInfo(now(), now(), True, 0)
    matrix = build_matrix([BY_ID["refresh.post_update_generation"]], [VLLM], [failing], info)
    write_reports(matrix.to_json(), tmp_path)
    written = json.loads((tmp_path / "matrix.json").read_text())
    [item] = written["capabilities"][0]["cells"]["fake-vllm"]["evidence"]
    saved = json.loads((tmp_path / item["wire_log"]).read_text())
    assert len(saved["sequence"]) == 4
    assert f"wire log: [{item['wire_log']}]" in (tmp_path / "matrix.md").read_text()


def test_a_long_sequence_keeps_its_start_and_its_end() -> None:
    wire = sequence_wire_log([exchange(n) for n in range(SEQUENCE_KEPT + 10)])
    positions = [step["position"] for step in wire["sequence"]]
    assert len(positions) == SEQUENCE_KEPT and wire["exchanges_elided"] == 10
    assert positions[0] == 0 and positions[-1] == SEQUENCE_KEPT + 9
