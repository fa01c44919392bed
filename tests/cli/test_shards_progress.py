"""Shards run in parallel processes say how far they are (shards done, targets reached and
tests recorded in their journals) and, when one writes no report, what it said."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rl_conformance.cli.shards import _Pool, _progress, run_shards, shard_directory


def test_progress_counts_the_shards_journals(tmp_path: Path) -> None:
    for index, (targets, records) in enumerate([(2, 5), (1, 0)]):
        journal = shard_directory(tmp_path, index) / "records.jsonl"
        journal.parent.mkdir(parents=True)
        lines = [{"kind": "target", "target": {"id": f"t{n}"}} for n in range(targets)]
        lines += [{"kind": "record", "record": {}} for _ in range(records)]
        journal.write_text("".join(json.dumps(line) + "\n" for line in lines))
    finished = subprocess.Popen(["true"])
    finished.wait()
    running = subprocess.Popen(["sleep", "5"])
    try:
        line = _progress("kill-matrix", [finished, running], tmp_path, 42.4)
    finally:
        running.kill()
        running.wait()
    assert line == "[kill-matrix] 1/2 shards done; 3 targets reached, 5 tests recorded (42 s)"


def test_a_shard_that_writes_no_report_is_named_with_what_it_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = run_shards(
        "validate", [["no-such-schema", "missing.json"]], tmp_path, "x.json", progress_every_s=0.2
    )
    assert found is None
    said = capsys.readouterr().err
    assert "validate shard 1/1 wrote no x.json (exit 2)" in said
    assert "no-such-schema" in said or "--report-dir" in said


def test_shards_beyond_the_limit_wait_their_turn_and_all_run(tmp_path: Path) -> None:
    """Four shards, two at a time: every one runs, in order, and never more than two at once."""
    script = (
        "import json, sys, time, pathlib; d = pathlib.Path(sys.argv[-1]); d.mkdir(parents=True);"
        "start = time.time(); time.sleep(0.3);"
        "(d / 'r.json').write_text(json.dumps({'start': start, 'end': time.time()}))"
    )
    arguments = [[] for _ in range(4)]
    errors = [open(tmp_path / f"err{i}", "w+") for i in range(4)]  # noqa: SIM115
    pool = _Pool("x", arguments, tmp_path, errors, 2, program=(sys.executable, "-c", script))
    said = pool.run(timeout_s=30, progress_every_s=0.1)
    assert [status for status, _ in said] == [0, 0, 0, 0]
    spans = [json.loads((shard_directory(tmp_path, i) / "r.json").read_text()) for i in range(4)]
    for span in spans:
        running = sum(other["start"] <= span["start"] < other["end"] for other in spans)
        assert running <= 2
    assert spans[0]["start"] < spans[2]["start"] and spans[1]["start"] < spans[3]["start"]


def test_shards_never_started_by_the_deadline_say_so(tmp_path: Path) -> None:
    script = "import time; time.sleep(30)"
    errors = [open(tmp_path / f"err{i}", "w+") for i in range(2)]  # noqa: SIM115
    pool = _Pool("x", [[], []], tmp_path, errors, 1, program=(sys.executable, "-c", script))
    said = pool.run(timeout_s=1.0, progress_every_s=0.1)
    assert said[0][1].endswith(" (did not finish within 1 s)")
    assert said[1] == (None, "never started: the shards did not finish within 1 s")


def test_an_interrupted_pool_leaves_no_shard_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "import time; time.sleep(30)"
    errors = [open(tmp_path / f"err{i}", "w+") for i in range(2)]  # noqa: SIM115
    pool = _Pool("x", [[], []], tmp_path, errors, 1, program=(sys.executable, "-c", script))

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("rl_conformance.cli.shards.time.sleep", interrupt)
    with pytest.raises(KeyboardInterrupt):
        pool.run(timeout_s=30.0, progress_every_s=0.1)
    assert [process.poll() is not None for process in pool.processes] == [True]
    errors[1].seek(0)
    assert errors[1].read() == "never started: the shards were interrupted"
