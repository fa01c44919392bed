"""`rl-conformance diff`: crafted pairs of matrices, one per kind of change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.baseline import diff_matrices, load_matrix, render_diff
from rl_conformance.errors import ConfigurationError


def matrix(cells: dict[tuple[str, str], str], complete: bool = True) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    targets: list[str] = []
    for (capability, target), outcome in cells.items():
        rows.setdefault(capability, {"id": capability, "cells": {}})["cells"][target] = {
            "outcome": outcome,
            "reason": f"{outcome} because",
        }
        if target not in targets:
            targets.append(target)
    return {
        "complete": complete,
        "targets": [{"id": t} for t in targets],
        "capabilities": list(rows.values()),
    }


BASE = {("a", "t1"): "pass", ("b", "t1"): "fail", ("c", "t1"): "skipped", ("d", "t1"): "pass"}


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        ({("a", "t1"): "fail"}, "regressions"),
        ({("a", "t1"): "error"}, "regressions"),
        ({("b", "t1"): "pass"}, "fixes"),
        ({("c", "t1"): "fail"}, "newly_failing"),
        ({("a", "t1"): "skipped"}, "other_changes"),
        ({("b", "t1"): "error"}, "other_changes"),
    ],
)
def test_each_transition_is_classified(changes: dict[tuple[str, str], str], kind: str) -> None:
    result = diff_matrices(matrix(BASE), matrix(BASE | changes))
    found = result.to_json()
    assert len(found[kind]) == 1
    assert (
        sum(len(found[k]) for k in ("regressions", "fixes", "newly_failing", "other_changes")) == 1
    )
    assert result.exit_status == (1 if kind == "regressions" else 0)


def test_new_and_removed_rows_and_targets_are_listed_not_regressions() -> None:
    old = matrix(BASE)
    new = matrix({("a", "t1"): "pass", ("e", "t1"): "fail", ("a", "t2"): "fail"})
    result = diff_matrices(old, new)
    assert result.new_capabilities == ["e"]
    assert result.removed_capabilities == ["b", "c", "d"]
    assert result.new_targets == ["t2"]
    assert result.removed_targets == []
    assert result.exit_status == 0


def test_identical_matrices_have_no_change() -> None:
    result = diff_matrices(matrix(BASE), matrix(BASE))
    assert result.to_json()["regressions"] == [] and result.exit_status == 0
    assert render_diff(result).startswith("0 regression(s), 0 fix(es)")


def test_markdown_puts_regressions_first_and_says_when_a_run_was_incomplete() -> None:
    result = diff_matrices(
        matrix(BASE), matrix(BASE | {("a", "t1"): "fail", ("b", "t1"): "pass"}, complete=False)
    )
    text = render_diff(result, markdown=True)
    assert text.index("### Regressions") < text.index("### Fixes")
    assert "`a` on `t1`: pass -> fail (fail because)" in text
    assert "NEW is an incomplete run" in text


def test_the_cli_exits_1_on_regressions_only(tmp_path: Path) -> None:
    old, same, worse = tmp_path / "old.json", tmp_path / "same.json", tmp_path / "worse.json"
    old.write_text(json.dumps(matrix(BASE)))
    same.write_text(json.dumps(matrix(BASE | {("b", "t1"): "pass"})))
    worse.write_text(json.dumps(matrix(BASE | {("d", "t1"): "error"})))
    command = [sys.executable, "-m", "rl_conformance", "diff"]
    fixed = subprocess.run(
        [*command, str(old), str(same)], capture_output=True, text=True, timeout=60
    )
    assert fixed.returncode == 0 and "1 fix(es)" in fixed.stdout
    broke = subprocess.run(
        [*command, "--json", str(old), str(worse)], capture_output=True, text=True, timeout=60
    )
    assert broke.returncode == 1
    assert json.loads(broke.stdout)["regressions"][0]["capability"] == "d"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{", "not JSON"),
        ("[]", "expected a matrix.json object, observed list"),
        ('{"capabilities": {}}', "field 'capabilities': expected a list"),
    ],
)
def test_a_bad_file_is_named(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "m.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigurationError, match=message):
        load_matrix(path)
