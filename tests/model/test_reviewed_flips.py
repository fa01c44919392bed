"""The reviewed kill-matrix flips are regenerated from a kill matrix (`rl-conformance kill-matrix
--flips FILE`): under each fault what it flipped, but the secondary flips the file allows; its
description and allowances kept, so a run that flips what was reviewed rewrites it byte for
byte and any other run shows as a diff to review."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.cli import main
from rl_conformance.cli.kill_matrix import _summarise
from rl_conformance.model.killmatrix import reviewed_flips, write_reviewed_flips

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "fixtures" / "expected" / "kill-matrix-flips.json"


def kill_of(flips: dict[str, list[str]], complete: bool = True) -> dict[str, Any]:
    return {
        "complete": complete,
        "faults": [{"fault": name, "flipped": rows} for name, rows in flips.items()],
        "clean_failures": [],
        "unkilled_faults": [],
        "checks_killing_nothing": [],
    }


def test_a_run_that_flips_what_was_reviewed_rewrites_it_byte_for_byte(tmp_path: Path) -> None:
    reviewed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    observed = {
        fault: [*rows, *reviewed["may_also_flip"].get(fault, [])]  # a slow machine's extras
        for fault, rows in reversed(reviewed["flips"].items())
    }
    copy = tmp_path / "flips.json"
    copy.write_text(COMMITTED.read_text(encoding="utf-8"), encoding="utf-8")
    write_reviewed_flips(kill_of(observed), copy)
    assert copy.read_text(encoding="utf-8") == COMMITTED.read_text(encoding="utf-8")


def test_a_new_fault_is_added_and_a_fault_gone_is_dropped() -> None:
    reviewed = {"description": "d", "flips": {"gone": ["a.b"]}, "may_also_flip": {"new": ["c.d"]}}
    rewritten = reviewed_flips(kill_of({"new": ["c.d", "a.b"]}), reviewed)
    assert rewritten == {
        "description": "d",
        "flips": {"new": ["a.b"]},
        "may_also_flip": {"new": ["c.d"]},
    }


def test_an_incomplete_kill_matrix_rewrites_nothing(tmp_path: Path) -> None:
    (tmp_path / "kill-matrix.json").write_text(json.dumps(kill_of({"f": ["a.b"]}, complete=False)))
    flips = tmp_path / "flips.json"
    flips.write_text('{"flips": {}}\n')
    _summarise(tmp_path, flips)
    assert flips.read_text() == '{"flips": {}}\n'
    (tmp_path / "kill-matrix.json").write_text(json.dumps(kill_of({"f": ["a.b"]})))
    _summarise(tmp_path, flips)
    assert json.loads(flips.read_text())["flips"] == {"f": ["a.b"]}


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "a file in an existing directory"), ("[]", "a JSON object"), ("{", "a JSON file")],
)
def test_a_bad_flips_file_is_named_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, said: str
) -> None:
    flips = tmp_path / "absent" / "flips.json"
    if content is not None:
        flips = tmp_path / "flips.json"
        flips.write_text(content)
    report = tmp_path / "report"
    assert main(["kill-matrix", "--flips", str(flips), "--report-dir", str(report)]) == 2
    assert f"--flips: expected {said}" in capsys.readouterr().err
    assert not report.exists()
