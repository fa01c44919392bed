"""Comparable or not, said once: every matrix records whether its run completed and reached every
target, and why not; `diff` compares only what both runs judged (a target not reached is not
comparable, a cell a cut run never reached is not run) and names each run's cause in one line."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rl_conformance.checks import schema_check
from rl_conformance.model import comparability, exits
from rl_conformance.model.baseline import diff_matrices, render_diff
from rl_conformance.model.capabilities import BY_ID
from rl_conformance.model.matrix import Outcome, RunInfo, TestRecord, build_matrix, now
from rl_conformance.model.target import Target

CAPABILITIES = [
    BY_ID["tokens.completion_ids"],
    BY_ID["stream.done_last"],
    BY_ID["tokens.choice_count"],
]
TARGET = Target(id="external-vllm", backend="vllm", kind="external", frontend_url="http://h:8000")
TIMEOUT = "--run-timeout: the run was stopped after 3600 s"


def passed(capability: str) -> TestRecord:
    return TestRecord(f"t::{capability}", (capability,), TARGET.id, Outcome.PASS)


def document(
    records: list[TestRecord], *, reason: str | None = None, target: Target = TARGET
) -> dict[str, Any]:
    run = RunInfo(now(), now(), complete=reason is None, seed=1, incomplete_reason=reason)
    return build_matrix(CAPABILITIES, [target], records, run).to_json()


def unreached(kind: str | None, why: str = "external-vllm: it did not answer") -> Target:
    return dataclasses.replace(TARGET, unreached=why, unreached_kind=kind)


ALL = [passed(capability.id) for capability in CAPABILITIES]


def test_a_complete_run_that_reached_its_target_is_comparable() -> None:
    found = document(ALL)
    assert found["comparable"] is True and "not_comparable" not in found
    assert schema_check("matrix", found).passed
    assert comparability.of_matrix(found).comparable


@pytest.mark.parametrize(
    ("reason", "cause", "status"),
    [
        (TIMEOUT, comparability.TIMED_OUT, exits.EXIT_TIMEOUT),
        (exits.SIGINT_REASON, comparability.INTERRUPTED, exits.EXIT_INTERRUPTED),
        (exits.SIGTERM_REASON, comparability.TERMINATED, exits.EXIT_TERMINATED),
        ("rebuilt from 1 test records: the run ended before its report", "cut short", 1),
    ],
)
def test_a_cut_run_says_why_and_marks_the_cells_it_never_reached(
    reason: str, cause: str, status: int
) -> None:
    found = document(ALL[:1], reason=reason)
    assert found["comparable"] is False
    assert found["not_comparable"] == {"cause": cause, "reason": reason}
    assert found["exit_status"] == status
    assert schema_check("matrix", found).passed
    cells = {row["id"]: row["cells"][TARGET.id] for row in found["capabilities"]}
    assert "not_run" not in cells["tokens.completion_ids"]  # it ran
    assert cells["stream.done_last"]["not_run"] is True
    assert cells["stream.done_last"]["outcome"] == "error"


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (comparability.PREFLIGHT_REFUSED, exits.EXIT_USAGE),
        (comparability.NOT_AUTHORISED, exits.EXIT_UNREACHED),
        (comparability.NOT_REACHED, exits.EXIT_UNREACHED),
    ],
)
def test_a_target_not_reached_says_its_kind_and_exits_by_it(kind: str, status: int) -> None:
    """A preflight refusal is the user's input to fix (2); the others a deployment not reached
    (3), even when no cell of it failed."""
    found = document([], target=unreached(kind))
    assert found["not_comparable"] == {"cause": kind, "reason": "external-vllm: it did not answer"}
    assert found["targets"][0]["unreached_kind"] == kind
    assert found["exit_status"] == status
    assert schema_check("matrix", found).passed


def test_a_matrix_written_before_the_fields_is_judged_from_what_it_has() -> None:
    old = {"complete": True, "targets": [{"id": "t", "unreached": "t: refused"}]}
    assert comparability.of_matrix(old).sentence() == "not reached: t: refused"
    cut = {"complete": False, "incomplete_reason": TIMEOUT, "targets": [{"id": "t"}]}
    assert comparability.of_matrix(cut).cause == comparability.TIMED_OUT
    assert comparability.not_run({"outcome": "error", "reason": f"not reached: {TIMEOUT}"})
    assert not comparability.not_run({"outcome": "error", "reason": "not reached", "tests": [{}]})


def test_a_cut_run_compares_the_cells_it_reached_and_not_the_others() -> None:
    """A timeout is not a list of regressions: its unreached cells are not run; the cells it
    reached are compared as any other (a real regression among them is still one)."""
    baseline = document(ALL)
    cut = document(ALL[:1], reason=TIMEOUT)
    result = diff_matrices(baseline, cut)
    assert result.regressions == [] and result.coverage_lost == []
    assert result.not_run == [("stream.done_last", TARGET.id), ("tokens.choice_count", TARGET.id)]
    assert result.exit_status == exits.EXIT_UNREACHED
    text = render_diff(result)
    assert text.splitlines()[0] == f"not comparable: NEW timed out: {TIMEOUT}"
    assert text.count(TIMEOUT) == 1
    assert "2 cell(s) not run" in text
    failing = TestRecord("t::x", ("tokens.completion_ids",), TARGET.id, Outcome.FAIL, "broke")
    regressed = diff_matrices(baseline, document([failing], reason=TIMEOUT))
    assert [(c.capability, c.new) for c in regressed.regressions] == [
        ("tokens.completion_ids", "fail")
    ]
    assert regressed.exit_status == exits.EXIT_FAILED
    assert regressed.to_json()["new_not_comparable"]["cause"] == comparability.TIMED_OUT


def test_a_refused_night_is_one_line_and_no_regression() -> None:
    refused = document([], target=unreached(comparability.PREFLIGHT_REFUSED, "x: --rl-url wrong"))
    result = diff_matrices(document(ALL), refused)
    assert result.regressions == [] and result.exit_status == exits.EXIT_UNREACHED
    text = render_diff(result)
    assert text.splitlines()[0] == "not comparable: NEW preflight refused: x: --rl-url wrong"
    assert text.count("--rl-url wrong") == 1
    assert result.to_json()["comparable"] is False
