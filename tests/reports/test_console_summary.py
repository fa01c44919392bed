"""The run's last words (`reports.console`): at a terminal a failing cell is one line; in a CI
log (stdout not a terminal) every failing cell's reason is printed whole, wrapped, never cut;
on GitHub Actions each failing cell is also an annotation; a skip reason is grouped by the flag
or the launch that would cover it, and read whole when it names none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rl_conformance.model.target import judged_only_where_offered
from rl_conformance.reports import console

LONG = (
    "on worker 7587886443219045121: prompt token 1 has another log probability than "
    "/conformance/weights/update-2 (cold start) gives it (tolerance 0.01 nats: the reference is "
    "the deployment's own answer on a cold start): the served weights are not that checkpoint"
)
UNGROUPED = (
    "no selected worker's /metrics has vllm:rl_weight_update_operations_in_flight after a "
    "weight update: vLLM's online RL API exports it (vllm 0.32+)"
)


def cell(outcome: str, reason: str, nodeid: str = "test_x.py::test_y[t]") -> dict[str, Any]:
    return {"outcome": outcome, "reason": reason, "tests": [{"nodeid": nodeid}]}


def matrix(cells: dict[str, dict[str, Any]], unreached: str | None = None) -> dict[str, Any]:
    rows = [
        {"id": capability, "level": "MUST", "cells": {"fake-vllm": found}}
        for capability, found in cells.items()
    ]
    return {
        "targets": [{"id": "fake-vllm", **({"unreached": unreached} if unreached else {})}],
        "capabilities": rows,
        "summary": {"fail": 1},
        "complete": True,
        "exit_status": 1,
    }


DOCUMENT = matrix(
    {
        "refresh.served_policy_verified": cell("fail", LONG),
        "stream.single_terminal": cell("error", "choice 0 has 2 terminal events, 100% sure"),
        "migration.continuity": cell("skipped", judged_only_where_offered(["worker_kill"])),
        "telemetry.weight_update_gauge": cell("skipped", UNGROUPED),
    }
)


def summary(**options: Any) -> list[str]:
    return console.summary_lines(DOCUMENT, report_dir=Path("report"), width=80, **options)


def test_at_a_terminal_a_failing_cell_is_one_line() -> None:
    lines = summary(terminal=True)
    (line,) = [line for line in lines if line.startswith("FAIL ")]
    assert line.endswith(" ...") and len(line) <= 80


def test_in_a_log_every_reason_is_whole_and_wrapped() -> None:
    lines = summary(terminal=False)
    start = next(n for n, line in enumerate(lines) if line.startswith("FAIL "))
    said = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        said.append(line.strip())
    assert " ".join(said) == f"FAIL refresh.served_policy_verified on fake-vllm: {LONG}"
    assert all(len(line) <= 80 for line in lines if not line.startswith("reports:"))
    assert not any(line.endswith("...") for line in lines)


def test_skips_name_what_would_cover_them_in_plain_words() -> None:
    text = "\n".join(summary(terminal=False))
    assert "judged only on a deployment the suite launches (--fake NAME," in text
    assert "vllm:rl_weight_update_operations_in_flight" in text  # read whole, not its head
    assert "worker_kill" not in text


@pytest.mark.parametrize(
    ("reason", "cover"),
    [
        (
            "read-only run: weight updates not sent (use --allow-mutations with --worker ID or "
            "--all-workers)",
            "use --allow-mutations with --worker ID or --all-workers",
        ),
        (
            "the frontend's request trace: give --request-trace FILE (the DYN_REQUEST_TRACE "
            "file sink)",
            "the frontend's request trace: give --request-trace FILE",
        ),
        (
            "the frontend runs with --migration-limit 0 (Dynamo's default) and moves no "
            "request: give --migration-limit N (N > 0) to judge migration",
            "the frontend runs with --migration-limit 0 (Dynamo's default) and moves no "
            "request: give --migration-limit N",
        ),
        (
            judged_only_where_offered(["listener_restart", "probe_reply"]),
            "judged only on a deployment the suite launches (--fake NAME)",
        ),
        (UNGROUPED, UNGROUPED),
    ],
)
def test_the_cover_of_a_skip_reason(reason: str, cover: str) -> None:
    assert console.cover_of(reason) == cover


def test_on_github_actions_each_failing_cell_is_an_annotation() -> None:
    lines = summary(terminal=False, annotate=True)
    annotations = [line for line in lines if line.startswith("::")]
    assert annotations == [
        "::error title=FAIL refresh.served_policy_verified on fake-vllm::" + LONG,
        "::error title=ERROR stream.single_terminal on fake-vllm::choice 0 has 2 terminal "
        "events, 100%25 sure",
    ]
    assert not [line for line in summary(terminal=False) if line.startswith("::")]


def test_an_annotation_names_the_suite_file_in_a_checkout_and_the_target_not_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "test_x.py").write_text("")
    monkeypatch.chdir(tmp_path)
    document = matrix(
        {"tokens.completion_ids": cell("fail", "ids: a, b\nc")},
        unreached=None,
    )
    (line,) = console.annotation_lines(document)
    assert line == (
        "::error file=suites/test_x.py,title=FAIL tokens.completion_ids on fake-vllm::ids: a, b c"
    )
    unreached = matrix({"tokens.completion_ids": cell("error", "x")}, unreached="no answer: 7")
    assert console.annotation_lines(unreached) == [
        "::error title=NOT REACHED fake-vllm::no answer: 7"
    ]


def test_annotations_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert console.in_github_actions()
    monkeypatch.delenv("GITHUB_ACTIONS")
    assert not console.in_github_actions()
