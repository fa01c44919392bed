"""Every rendering says, per target, the versions observed and where each was read, and the run's
`--record` facts as given by the user, never as observed."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from xml.etree import ElementTree

from rl_conformance.capabilities import CAPABILITIES
from rl_conformance.checks import schema_check
from rl_conformance.matrix import RunInfo, build_matrix, now
from rl_conformance.reports import render_html, render_junit, render_markdown
from rl_conformance.target import Target

OPENAPI = 'frontend GET /openapi.json info.version (info.title "NVIDIA Dynamo OpenAI Frontend")'


def matrix() -> dict[str, Any]:
    observed = Target(
        id="external-vllm",
        backend="vllm",
        kind="external",
        frontend_url="http://f:8000",
        versions={"dynamo": "1.6.1", "model.owned_by": "nvidia"},
        version_sources={
            "dynamo": OPENAPI,
            "model.owned_by": 'frontend GET /v1/models data[id="toy"].owned_by',
        },
    )
    silent = Target(
        id="external-sglang", backend="sglang", kind="external", frontend_url="http://g"
    )
    info = RunInfo(now(), now(), True, 0, recorded={"vllm": "0.11.0", "gpu": "<H100>"})
    document = build_matrix(CAPABILITIES[:2], [observed, silent], [], info).to_json()
    result = schema_check("matrix", document)
    assert result.passed, result.explain()
    return document


def test_markdown_has_a_versions_line_per_target_and_the_records_once() -> None:
    text = render_markdown(matrix())
    assert (
        f"  - versions: dynamo 1.6.1 [{OPENAPI}]; model.owned_by nvidia "
        '[frontend GET /v1/models data[id="toy"].owned_by]'
    ) in text
    assert "  - versions: none observed" in text  # the target that published nothing
    assert (
        text.count("Recorded by the user (--record, not observed): vllm 0.11.0, gpu <H100>.") == 1
    )


def test_html_shows_the_same_and_escapes_it() -> None:
    page = render_html(matrix())
    HTMLParser().feed(page)
    assert "recorded by the user (--record, not observed): vllm 0.11.0, gpu &lt;H100&gt;" in page
    assert (
        "versions: dynamo 1.6.1 <small>[frontend GET /openapi.json info.version (info.title "
        in page
    )
    assert "versions: none observed" in page
    assert "<H100>" not in page


def test_junit_carries_them_as_each_suites_properties() -> None:
    root = ElementTree.fromstring(render_junit(matrix()))
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    props = {
        name: {p.get("name"): p.get("value") for p in suite.iter("property")}
        for name, suite in suites.items()
    }
    assert props["external-vllm"] == {
        "version.dynamo": f"1.6.1 [{OPENAPI}]",
        "version.model.owned_by": 'nvidia [frontend GET /v1/models data[id="toy"].owned_by]',
        "recorded.vllm": "0.11.0 [--record]",
        "recorded.gpu": "<H100> [--record]",
    }
    assert props["external-sglang"] == {
        "recorded.vllm": "0.11.0 [--record]",
        "recorded.gpu": "<H100> [--record]",
    }
    vllm = suites["external-vllm"]
    assert vllm[0].tag == "properties"  # before the test cases, as JUnit readers expect
