"""A run that is not comparable (its credentials refused, a target not reached, cut short, no
matrix at all) is named in one line by `diff` and `baseline`, which exit 3 and never list its
error cells as regressions; a baseline is only ever a comparable run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.cli import main

REFUSED = (
    "external-vllm: the frontend at http://gw:8000 refused the credentials given (--token-env "
    "DYNAMO_TOKEN; GET /v1/models answered HTTP 401 Unauthorized): give valid ones with "
    "--header 'NAME: VALUE', --token-file FILE or --token-env VAR"
)


def matrix(outcome: str, unreached: str | None = None) -> dict[str, Any]:
    target: dict[str, Any] = {"id": "external-vllm"}
    if unreached:
        target["unreached"] = unreached
    return {
        "complete": True,
        "exit_status": 3 if unreached else 0,
        "summary": {outcome: 2},
        "targets": [target],
        "capabilities": [
            {"id": name, "cells": {"external-vllm": {"outcome": outcome, "reason": outcome}}}
            for name in ("tokens.token_input", "stream.done_last")
        ],
    }


def write(directory: Path, document: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "matrix.json"
    path.write_text(json.dumps(document))
    return path


def test_diff_calls_a_refused_run_not_comparable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = write(tmp_path / "old", matrix("pass"))
    new = write(tmp_path / "new", matrix("error", REFUSED))
    assert main(["diff", str(old), str(new)]) == 3
    assert "refused the credentials given" in capsys.readouterr().out
    assert main(["diff", str(old), str(new), "--json"]) == 3
    found = json.loads(capsys.readouterr().out)
    assert found["regressions"] == [] and found["coverage_lost"] == []
    assert list(found["not_comparable"]) == ["external-vllm"]


def test_a_first_night_that_reached_nothing_is_not_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "report", matrix("error", REFUSED))
    assert main(["baseline", str(tmp_path / "baseline"), str(tmp_path / "report")]) == 3
    assert not (tmp_path / "baseline" / "matrix.json").exists()
    said = capsys.readouterr().out
    assert said.startswith("not comparable: NEW not reached: external-vllm: the frontend at")
    assert "No baseline yet, and tonight's run is not comparable: nothing kept" in said


def test_a_refused_night_keeps_the_baseline_it_had(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = write(tmp_path / "baseline", matrix("pass"))
    write(tmp_path / "report", matrix("error", REFUSED))
    assert main(["baseline", str(tmp_path / "baseline"), str(tmp_path / "report")]) == 3
    assert json.loads(kept.read_text()) == matrix("pass")
    assert "the baseline is unchanged" in capsys.readouterr().out


def test_a_kept_baseline_that_is_not_comparable_is_replaced_by_the_first_comparable_night(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A baseline kept before it could be told (a night that reached nothing) never blocks the
    nights after it: the first comparable one seeds the baseline, whatever came before."""
    kept = write(tmp_path / "baseline", matrix("error", REFUSED))
    write(tmp_path / "report", matrix("pass"))
    assert main(["baseline", str(tmp_path / "baseline"), str(tmp_path / "report")]) == 0
    assert json.loads(kept.read_text()) == matrix("pass")
    said = capsys.readouterr().out
    assert "is not comparable (not reached: external-vllm: the frontend" in said
    assert "this matrix is the baseline" in said


def test_a_cut_night_keeps_the_baseline_and_names_its_cause_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = write(tmp_path / "baseline", matrix("pass"))
    cut = matrix("pass")
    cut |= {"complete": False, "incomplete_reason": "--run-timeout: stopped after 3600 s"}
    for row in cut["capabilities"][1:]:
        row["cells"]["external-vllm"] = {"outcome": "error", "reason": "x", "not_run": True}
    write(tmp_path / "report", cut)
    assert main(["baseline", str(tmp_path / "baseline"), str(tmp_path / "report")]) == 3
    assert json.loads(kept.read_text()) == matrix("pass")
    said = capsys.readouterr().out
    assert said.splitlines()[0] == (
        "not comparable: NEW timed out: --run-timeout: stopped after 3600 s"
    )
    assert "0 regression(s)" in said and "1 cell(s) not run" in said


def test_a_night_that_wrote_no_matrix_is_not_comparable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = write(tmp_path / "baseline", matrix("pass"))
    (tmp_path / "report").mkdir()
    assert main(["baseline", str(tmp_path / "baseline"), str(tmp_path / "report")]) == 3
    assert json.loads(kept.read_text()) == matrix("pass")
    assert capsys.readouterr().out.startswith("not comparable: no matrix was written")
