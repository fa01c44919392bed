"""No result is lost, and a run writes only under its report directory.

A run killed outright (SIGKILL: what the OOM killer or an evicted pod does) writes no report,
but every test that finished is in `records.jsonl`, readable, and `rl-conformance report DIR`
rebuilds the matrix from it, marked incomplete with the reason. A run leaves nothing in the
working directory or the temporary directory: hypothesis' files and the fakes' logs go to the
report directory. A failure several requests show (`refresh.*`) has the wire log of all of them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.checks import schema_check
from rl_conformance.reports.bundle import verify_index

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
RECORDS_BEFORE_THE_KILL = 5


def descendants_of(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, frontier = [], [pid]
    while frontier:
        below = children.get(frontier.pop(), [])
        found += below
        frontier += below
    return found


def records_in(journal: Path) -> list[dict[str, Any]]:
    """The complete lines of a journal that is being written (a last partial line left out)."""
    if not journal.exists():
        return []
    found = []
    for line in journal.read_text().splitlines():
        with contextlib.suppress(ValueError):
            document = json.loads(line)
            if document.get("kind") == "record":
                found.append(document)
    return found


def environment(tmp_path: Path) -> dict[str, str]:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("HYPOTHESIS_")},
        "TMPDIR": str(scratch),
        "PYTHONPATH": str(ROOT),
    }


def test_a_killed_run_leaves_its_records_and_report_rebuilds_the_matrix(tmp_path: Path) -> None:
    report = tmp_path / "report"
    journal = report / "records.jsonl"
    command = [sys.executable, "-m", "rl_conformance", "run", "-q", "--fake", "vllm"]
    process = subprocess.Popen(
        [*command, "--report-dir", str(report), "--examples", "30"],
        cwd=tmp_path,
        env=environment(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    launched: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            if len(records_in(journal)) >= RECORDS_BEFORE_THE_KILL:
                break
            time.sleep(0.05)
        assert process.poll() is None, "the run ended before it could be killed"
        assert len(records_in(journal)) >= RECORDS_BEFORE_THE_KILL
        launched = descendants_of(process.pid)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        for pid in launched:  # the fake deployment outlives a killed harness: stop it
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert not (report / "matrix.json").exists()  # nothing written at the end: it never came
    kept = records_in(journal)
    assert len(kept) >= RECORDS_BEFORE_THE_KILL
    lines = journal.read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "run"
    for line in lines[:-1]:  # only the last line may have been cut by the kill
        json.loads(line)

    done = subprocess.run(
        [sys.executable, "-m", "rl_conformance", "report", str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(tmp_path),
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]  # incomplete
    matrix = json.loads((report / "matrix.json").read_text())
    reason = f"rebuilt from {len(kept)} test records: the run ended before its report"
    assert matrix["complete"] is False
    assert matrix["incomplete_reason"].startswith(reason)
    assert f"incomplete run ({reason}" in done.stderr
    result = schema_check("matrix", matrix)
    assert result.passed, result.explain()
    cells = [cell for row in matrix["capabilities"] for cell in row["cells"].values()]
    assert "pass" in [cell["outcome"] for cell in cells]
    assert any(cell["reason"].startswith(f"not reached: {reason}") for cell in cells)
    assert sum(len(cell["tests"]) for cell in cells) >= len(kept)
    for name in ("matrix.md", "junit.xml", "matrix.html"):
        assert reason in (report / name).read_text(), name
    # The evidence is rebuilt too: a record that says the run did not complete, and a bundle.
    record = json.loads((report / "validation" / "fake-vllm.json").read_text())
    assert record["record_state"] != "passed" and reason in record["limitations"][0]
    digest = done.stdout.split("bundle.json sha256 ")[1].split()[0]
    assert verify_index(report, digest) == []


def test_a_multi_step_failure_has_its_wire_log_and_the_run_writes_only_its_report_dir(
    tmp_path: Path,
) -> None:
    report = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "-q",
            "--report-dir",
            "report",
            "--fake",
            "vllm",
            "--capability",
            "refresh.post_update_generation",
            "--fault",
            "update_keeps_old_weights",
        ],
        cwd=tmp_path,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "tmp"]  # no .hypothesis
    assert list((tmp_path / "tmp").iterdir()) == []  # no log left in the temporary directory
    assert (report / "logs" / "fake-vllm.log").is_file()
    matrix = json.loads((report / "matrix.json").read_text())
    cell = matrix["capabilities"][0]["cells"]["fake-vllm"]
    assert cell["outcome"] == "fail"
    [evidence] = cell["evidence"]
    assert evidence["reproducer"].startswith("# ")  # several requests show it
    requests = int(evidence["reproducer"].split()[1])
    wire = json.loads((report / evidence["wire_log"]).read_text())
    assert wire["requests"] == len(wire["sequence"]) and requests == min(requests, 20)
    assert requests == min(len(wire["sequence"]), 20)  # the reproducer: the last 20 at most
    urls = [step["request"]["url"] for step in wire["sequence"]]
    assert any(url.endswith("/engine/update_weights_from_disk") for url in urls)
    assert urls[-1].endswith("/v1/completions")  # the post-update generation that showed it
    assert "update_weights_from_disk -> HTTP 200" in evidence["wire_excerpt"]
    assert f"wire log: [{evidence['wire_log']}]" in (report / "matrix.md").read_text()
    # the journal holds the same record, and rebuilds the same, complete, matrix
    [line] = records_in(report / "records.jsonl")
    assert line["record"]["outcome"] == "fail"
    rebuilt = subprocess.run(
        [sys.executable, "-m", "rl_conformance", "report", "-q", str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(tmp_path),
    )
    assert rebuilt.returncode == 1  # the failure, not an incomplete run
    again = json.loads((report / "matrix.json").read_text())
    assert again["complete"] is True
    assert again["capabilities"] == matrix["capabilities"]


def test_a_parallel_run_journals_each_record_once_in_the_parent(tmp_path: Path) -> None:
    """Forked children send their records to the parent, which journals them: each once, and
    the matrix rebuilt from the journal is the one the run wrote."""
    report = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "-q",
            "--report-dir",
            str(report),
            "--fake",
            "vllm",
            "--fake",
            "sglang",
            "--jobs",
            "2",
            "--examples",
            "2",
            "--capability",
            "tokens.completion_ids",
            "--capability",
            "discovery.schema",
        ],
        cwd=tmp_path,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (report / "matrix.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    written = json.loads((report / "matrix.json").read_text())
    kept = records_in(report / "records.jsonl")
    nodeids = [line["record"]["nodeid"] for line in kept]
    assert len(nodeids) == len(set(nodeids))
    in_cells = {
        test["nodeid"]
        for row in written["capabilities"]
        for cell in row["cells"].values()
        for test in cell["tests"]
    }
    assert set(nodeids) == in_cells
    assert {line["record"]["target_id"] for line in kept} == {"fake-vllm", "fake-sglang"}
    subprocess.run(
        [sys.executable, "-m", "rl_conformance", "report", "-q", str(report)],
        capture_output=True,
        timeout=120,
        env=environment(tmp_path),
        check=False,
    )
    rebuilt = json.loads((report / "matrix.json").read_text())
    assert rebuilt["complete"] is True
    assert rebuilt["capabilities"] == written["capabilities"]
    assert rebuilt["targets"] == written["targets"]
