"""A run's warnings (a run that verified no TLS certificate, `--insecure`) open every
rendering: matrix.json carries them, matrix.md and matrix.html start with them, the console
summary prints them first, junit.xml has them as each suite's first properties, and each
validation record lists them first among its limitations. A run without warnings says nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rl_conformance.checks import schema_check
from rl_conformance.client.network import INSECURE_LINE
from rl_conformance.model.capabilities import CAPABILITIES
from rl_conformance.model.matrix import RunInfo, build_matrix, now
from rl_conformance.model.target import Target
from rl_conformance.reports import render_html, render_junit, render_markdown
from rl_conformance.reports.console import summary_lines
from rl_conformance.reports.validation import validation_record


def matrix(warnings: tuple[str, ...]) -> dict[str, Any]:
    target = Target(
        id="external-vllm", backend="vllm", kind="external", frontend_url="https://f:8443"
    )
    info = RunInfo(now(), now(), True, 0, warnings=warnings)
    document = build_matrix(CAPABILITIES[:2], [target], [], info).to_json()
    result = schema_check("matrix", document)
    assert result.passed, result.explain()
    return document


def test_an_insecure_run_says_so_first_in_every_report(tmp_path: Path) -> None:
    document = matrix((INSECURE_LINE,))
    assert document["warnings"] == [INSECURE_LINE]
    assert render_markdown(document).startswith(f"**{INSECURE_LINE}**\n")
    body = render_html(document).split("<body>", 1)[1]
    assert body.startswith(f"<p class='banner warning'>{INSECURE_LINE}</p>")
    console = summary_lines(document, report_dir=tmp_path, width=300)
    assert console[0] == f"!!! {INSECURE_LINE}"
    junit = render_junit(document)
    assert f'<property name="warning.1" value="{INSECURE_LINE}" />' in junit
    record = validation_record(document, "external-vllm", tmp_path)
    assert record["limitations"][0] == INSECURE_LINE


@pytest.mark.parametrize("rendering", [render_markdown, render_html, render_junit])
def test_a_run_without_warnings_says_nothing_of_them(rendering: Any) -> None:
    document = matrix(())
    assert "warnings" not in document
    assert INSECURE_LINE not in rendering(document)
    assert "warning." not in rendering(document) and "banner warning" not in rendering(document)
