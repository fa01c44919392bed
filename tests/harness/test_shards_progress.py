"""Shards run in parallel processes say how far they are (shards done, targets reached and
tests recorded in their journals) and, when one writes no report, what it said."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rl_conformance.cli.shards import _progress, run_shards, shard_directory


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
