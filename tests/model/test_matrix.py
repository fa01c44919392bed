from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from rl_conformance.checks import schema_check
from rl_conformance.model.capabilities import BY_ID, CAPABILITIES
from rl_conformance.model.matrix import (
    Evidence,
    Outcome,
    RunInfo,
    TestRecord,
    build_cell,
    build_matrix,
    now,
)
from rl_conformance.model.target import Target
from rl_conformance.reports import write_reports

VLLM = Target(id="fake-vllm", backend="vllm", kind="fake", frontend_url="http://127.0.0.1:1")
SGLANG = Target(id="fake-sglang", backend="sglang", kind="fake", frontend_url="http://127.0.0.1:2")


def record(
    outcome: Outcome,
    capability: str = "tokens.completion_ids",
    target: Target = VLLM,
    reason: str = "",
) -> TestRecord:
    return TestRecord(
        nodeid=f"t::{outcome.value}",
        capabilities=(capability,),
        target_id=target.id,
        outcome=outcome,
        reason=reason,
        checks=[("tokens.completion_ids_present", outcome is Outcome.PASS)],
    )


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([Outcome.PASS, Outcome.PASS], Outcome.PASS),
        ([Outcome.PASS, Outcome.FAIL], Outcome.FAIL),
        ([Outcome.FAIL, Outcome.ERROR], Outcome.ERROR),
        ([Outcome.PASS, Outcome.SKIPPED], Outcome.PASS),
        ([Outcome.SKIPPED], Outcome.SKIPPED),
        ([Outcome.NOT_ADVERTISED, Outcome.PASS], Outcome.NOT_ADVERTISED),
    ],
)
def test_cell_precedence(outcomes: list[Outcome], expected: Outcome) -> None:
    cell = build_cell(BY_ID["tokens.completion_ids"], VLLM, [record(o) for o in outcomes])
    assert cell.outcome is expected


def test_zero_selected_tests_is_an_error_never_a_pass() -> None:
    cell = build_cell(BY_ID["tokens.completion_ids"], VLLM, [])
    assert cell.outcome is Outcome.ERROR
    assert "no test selected" in cell.reason


def test_a_pass_counts_only_the_tests_that_passed() -> None:
    """A cell passed by one test while others did not run says so, with why they did not."""
    capability = BY_ID["tokens.completion_ids"]
    ran = record(Outcome.PASS, capability.id)
    gone = record(Outcome.SKIPPED, capability.id, reason="not run: the worker died at pause")
    assert build_cell(capability, VLLM, [ran, ran]).reason == "2 test(s) passed"
    cell = build_cell(capability, VLLM, [ran, gone, gone])
    assert cell.outcome is Outcome.PASS
    assert cell.reason == "1 test(s) passed, 2 did not run (not run: the worker died at pause)"


def test_absent_feature_fails_where_documented_supported() -> None:
    capability = BY_ID["discovery.worker_registration"]
    absent = record(Outcome.ABSENT, capability.id, reason="lists no RL workers")
    cell = build_cell(capability, VLLM, [absent])
    assert cell.outcome is Outcome.FAIL
    assert cell.contradicts_documentation


def test_absent_feature_is_unsupported_where_documented_unsupported() -> None:
    capability = BY_ID["discovery.worker_registration"]
    absent = record(Outcome.ABSENT, capability.id, SGLANG, reason="lists no RL workers")
    cell = build_cell(capability, SGLANG, [absent])
    assert cell.outcome is Outcome.UNSUPPORTED
    assert not cell.contradicts_documentation


def test_working_feature_documented_unsupported_is_flagged() -> None:
    capability = BY_ID["discovery.worker_registration"]
    cell = build_cell(capability, SGLANG, [record(Outcome.PASS, capability.id, SGLANG)])
    assert cell.outcome is Outcome.PASS
    assert cell.contradicts_documentation


def matrix_with(records: list[TestRecord], complete: bool = True) -> dict:
    info = RunInfo(started_at=now(), finished_at=now(), complete=complete, seed=3)
    return build_matrix(CAPABILITIES, [VLLM, SGLANG], records, info).to_json()


def test_matrix_conforms_to_its_schema_and_counts_cells() -> None:
    failing = record(Outcome.FAIL)
    failing.evidence = [
        Evidence(
            "tokens.completion_ids_present", "absent", "nvext", "ids", float("nan"), "curl ..."
        )
    ]
    matrix = matrix_with([record(Outcome.PASS), failing])
    result = schema_check("matrix", matrix)
    assert result.passed, result.explain()
    assert sum(matrix["summary"].values()) == len(CAPABILITIES) * 2
    assert matrix["exit_status"] == 1
    json.dumps(matrix, allow_nan=False)


def test_incomplete_run_is_marked_and_fails() -> None:
    matrix = matrix_with([], complete=False)
    assert matrix["complete"] is False
    assert matrix["exit_status"] == 1
    cell = matrix["capabilities"][0]["cells"]["fake-vllm"]
    assert "interrupted" in cell["reason"]


def test_all_report_formats_are_written(tmp_path: Path) -> None:
    matrix = matrix_with([record(Outcome.PASS), record(Outcome.FAIL)])
    written = write_reports(matrix, tmp_path)
    assert sorted(path.name for path in written) == [
        "junit.xml",
        "matrix.html",
        "matrix.json",
        "matrix.md",
    ]
    assert json.loads((tmp_path / "matrix.json").read_text())["schema_version"] == 1
    suites = ElementTree.parse(tmp_path / "junit.xml").getroot()
    assert {suite.get("name") for suite in suites} == {"fake-vllm", "fake-sglang"}
    markdown = (tmp_path / "matrix.md").read_text()
    assert "tokens.completion_ids" in markdown and "**FAIL**" in markdown
    assert "<table id='grid'>" in (tmp_path / "matrix.html").read_text()


def test_a_surface_the_release_lacks_makes_the_cell_unsupported() -> None:
    """Judged against the deployment's release: a failing test of a capability whose surface
    that release lacks is `unsupported` (release named), while on a release that has it the
    same failure fails; a pass there contradicts the release table."""
    from dataclasses import replace
    from types import MappingProxyType

    from rl_conformance.model.capabilities import get
    from rl_conformance.model.matrix import Outcome, TestRecord, build_cell
    from rl_conformance.model.releases import Surface

    surfaces = (
        Surface(
            "frontend.input_tokens",
            "POST /v1/responses/input_tokens",
            ("tokens.input_tokens_estimate",),
            MappingProxyType({"main": "docs"}),
        ),
    )
    capability = get("tokens.input_tokens_estimate")
    failed = TestRecord("t::x", (capability.id,), VLLM.id, Outcome.FAIL, reason="404")
    old = replace(VLLM, release="1.6.1")
    cell = build_cell(capability, old, [failed], surfaces)
    assert cell.outcome is Outcome.UNSUPPORTED
    assert "not in Dynamo 1.6.1 (POST /v1/responses/input_tokens)" in cell.reason
    assert build_cell(capability, VLLM, [failed], surfaces).outcome is Outcome.FAIL
    passed = replace(failed, outcome=Outcome.PASS, reason="")
    assert build_cell(capability, old, [passed], surfaces).contradicts_documentation
