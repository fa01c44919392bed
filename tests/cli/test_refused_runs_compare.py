"""A run whose deployment refused the credentials is not comparable: `diff` and `baseline` exit 3
and name it, never list its error cells as regressions, and a first night that reached nothing
is not kept as the baseline."""

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
    assert "did not reach external-vllm" in capsys.readouterr().out


def test_a_refused_night_keeps_the_baseline_it_had(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = write(tmp_path / "baseline", matrix("pass"))
    write(tmp_path / "report", matrix("error", REFUSED))
    assert main(["baseline", str(tmp_path / "baseline"), str(tmp_path / "report")]) == 3
    assert json.loads(kept.read_text()) == matrix("pass")
    assert "the baseline is unchanged" in capsys.readouterr().out
