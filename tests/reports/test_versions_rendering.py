"""Every rendering says, per target, the versions observed and where each was read, its Dynamo
release with how it is known (observed, declared, or not known: then only the basis of judging),
and the run's `--record` facts as given by the user, never as observed."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from xml.etree import ElementTree

from rl_conformance.checks import schema_check
from rl_conformance.model.capabilities import CAPABILITIES
from rl_conformance.model.matrix import RunInfo, build_matrix, now
from rl_conformance.model.target import Target
from rl_conformance.reports import render_html, render_junit, render_markdown

OPENAPI = 'frontend GET /openapi.json info.version (info.title "NVIDIA Dynamo OpenAI Frontend")'
UNKNOWN = "Dynamo release not observed (judged as main, the default basis)"


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
        release="1.6.1",
        release_source="observed",
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
        "dynamo_release": f"Dynamo 1.6.1 (observed: {OPENAPI})",
        "recorded.vllm": "0.11.0 [--record]",
        "recorded.gpu": "<H100> [--record]",
    }
    assert props["external-sglang"] == {
        "dynamo_release": UNKNOWN,
        "recorded.vllm": "0.11.0 [--record]",
        "recorded.gpu": "<H100> [--record]",
    }
    vllm = suites["external-vllm"]
    assert vllm[0].tag == "properties"  # before the test cases, as JUnit readers expect


def test_the_release_is_said_with_how_it_is_known_alike_in_json_and_every_rendering() -> None:
    document = matrix()
    json_targets = {t["id"]: t for t in document["targets"]}
    assert json_targets["external-vllm"]["dynamo_release"] == "1.6.1"
    assert json_targets["external-vllm"]["dynamo_release_source"] == "observed"
    # not known: `main` stays the basis of judging (backward compatible), never a claim
    assert json_targets["external-sglang"]["dynamo_release"] == "main"
    assert json_targets["external-sglang"]["dynamo_release_source"] == "unknown"
    text = render_markdown(document)
    assert f"(vllm, external; Dynamo 1.6.1 (observed: {OPENAPI}))" in text
    assert f"(sglang, external; {UNKNOWN})" in text
    assert "Dynamo main" not in text
    page = render_html(document)
    assert "Dynamo 1.6.1 (observed: frontend GET /openapi.json info.version" in page
    assert UNKNOWN in page and "Dynamo main" not in page


def test_a_declared_release_is_said_as_declared() -> None:
    declared = Target(
        id="external-vllm",
        backend="vllm",
        kind="external",
        frontend_url="http://f:8000",
        release="1.6.1",
        release_source="--dynamo-release",
    )
    info = RunInfo(now(), now(), True, 0)
    document = build_matrix(CAPABILITIES[:1], [declared], [], info).to_json()
    assert schema_check("matrix", document).passed
    assert document["targets"][0]["dynamo_release_source"] == "--dynamo-release"
    assert "Dynamo 1.6.1 (declared with --dynamo-release, not observed)" in render_markdown(
        document
    )
