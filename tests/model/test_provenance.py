"""Versions read from what a deployment publishes, each with where it was read; nothing from what
it does not publish (the real 1.6.1 recordings, then samples of what other releases and vLLM
publish)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.model import provenance
from rl_conformance.model.provenance import Observed
from rl_conformance.model.target import Target

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "dynamo-1.6.1"


def recorded(engine: str, name: str) -> dict[str, Any]:
    response: dict[str, Any] = json.loads((RECORDED / engine / f"{name}.json").read_text())[
        "response"
    ]
    return response


# -- the real Dynamo 1.6.1 -----------------------------------------------------------------------


def test_the_real_1_6_1_frontend_names_its_version_in_its_openapi_document() -> None:
    body = recorded("mocker", "frontend_openapi")["body"]
    assert provenance.from_openapi(body) == [
        Observed(
            "dynamo",
            "1.6.1",
            'frontend GET /openapi.json info.version (info.title "NVIDIA Dynamo OpenAI Frontend")',
        )
    ]


@pytest.mark.parametrize(
    ("engine", "name"),
    [
        ("mocker", "frontend_metrics_series"),
        ("mocker", "worker_metrics_series"),
        ("mocker", "frontend_metrics_after_cancel"),
        ("mocker", "worker_metrics_after_cancel"),
        ("toy-worker", "frontend_metrics_after_cancel"),
        ("toy-worker", "worker_metrics_after_cancel"),
        ("vllm-sidecar", "worker_metrics"),
    ],
)
def test_the_real_1_6_1_metrics_name_no_version_so_none_is_recorded(engine: str, name: str) -> None:
    text = recorded(engine, name)["text"]
    assert "dynamo_" in text
    assert provenance.from_metrics(text, "worker") == {}
    assert provenance.from_scrapes([("http://w", text)], "worker", "worker") == []


def test_the_real_1_6_1_completion_fingerprint_is_null_so_none_is_recorded() -> None:
    for engine in ("mocker", "toy-worker"):
        body = recorded(engine, "completions_logprobs_2")["body"]
        assert "system_fingerprint" in body and body["system_fingerprint"] is None
        assert provenance.from_completion(body) == []


def test_the_real_1_6_1_models_listing_says_who_owns_the_model() -> None:
    body = recorded("mocker", "models")["body"]
    assert provenance.from_models(body, "toy") == [
        Observed("model.owned_by", "nvidia", 'frontend GET /v1/models data[id="toy"].owned_by')
    ]
    assert provenance.from_models(body, None) == provenance.from_models(body, "toy")
    assert provenance.from_models(body, "another-model") == []


# -- what other servers publish ------------------------------------------------------------------


def test_another_api_is_named_by_its_plane_with_its_title() -> None:
    document = {"openapi": "3.1.0", "info": {"title": "My Gateway", "version": "2.4"}}
    assert provenance.from_openapi(document) == [
        Observed(
            "frontend.openapi",
            "2.4",
            'frontend GET /openapi.json info.version (info.title "My Gateway")',
        )
    ]


@pytest.mark.parametrize(
    "document",
    [None, [], "1.6.1", {}, {"info": None}, {"info": {}}, {"info": {"version": ""}},
     {"info": {"version": None}}, {"info": {"version": True}}, {"info": {"version": {"x": 1}}}],
)  # fmt: skip
def test_an_openapi_document_without_a_version_records_nothing(document: Any) -> None:
    assert provenance.from_openapi(document) == []


def test_vllm_fingerprint_gives_the_vllm_version_and_quotes_the_fingerprint() -> None:
    for fingerprint, version in (
        ("vllm-0.11.0-tp2-1a2b3c4d", "0.11.0"),
        ("vllm-0.31.0-5e6f7a8b", "0.31.0"),
        ("vllm-0.12.1rc2.dev45+g1234abc-nohash", "0.12.1rc2.dev45+g1234abc"),
    ):
        [observed] = provenance.from_completion({"system_fingerprint": fingerprint})
        assert observed.key == "vllm" and observed.value == version
        assert (
            observed.source == f'frontend POST /v1/completions system_fingerprint "{fingerprint}"'
        )


def test_another_fingerprint_is_recorded_as_it_is() -> None:
    assert provenance.from_completion({"system_fingerprint": "fp_44709d6fcb"}) == [
        Observed(
            "system_fingerprint",
            "fp_44709d6fcb",
            "frontend POST /v1/completions system_fingerprint",
        )
    ]


@pytest.mark.parametrize(
    "body",
    [None, [], {}, {"system_fingerprint": None}, {"system_fingerprint": ""},
     {"system_fingerprint": 7}],
)  # fmt: skip
def test_no_fingerprint_records_nothing(body: Any) -> None:
    assert provenance.from_completion(body) == []


def test_version_fields_of_the_model_entry_are_recorded() -> None:
    body = {
        "data": [
            {"id": "m", "owned_by": "vllm", "root": "/models/m", "revision": "abc123"},
            {"id": "n", "owned_by": "other"},
        ]
    }
    assert [(o.key, o.value) for o in provenance.from_models(body, "m")] == [
        ("model.owned_by", "vllm"),
        ("model.revision", "abc123"),
    ]
    assert provenance.from_models(body, None) == []  # two listed, none named: no guess


BUILD_INFO = """\
# HELP dynamo_build_info Build information
# TYPE dynamo_build_info gauge
dynamo_build_info{version="1.7.0",git_commit="0a1b2c3",dynamo_namespace="dynamo",rustc="1.90"} 1
python_info{implementation="CPython",major="3",minor="12",patchlevel="3",version="3.12.3"} 1
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",gpu_memory_utilization="0.9"} 1
dynamo_component_requests_total{dynamo_endpoint="generate",weight_version="step-3"} 4
vllm:build_info{version="0.11.0",engine="0"} 1
vllm:build_info{version="0.11.0",engine="1"} 1
"""


def test_build_info_and_version_labels_are_recorded_and_nothing_else() -> None:
    assert provenance.from_metrics(BUILD_INFO, "frontend") == {
        "frontend.dynamo_build_info.version": ["1.7.0"],
        "frontend.dynamo_build_info.git_commit": ["0a1b2c3"],
        "frontend.python_info.version": ["3.12.3"],
        "frontend.vllm:build_info.version": ["0.11.0"],
    }


def test_a_scrape_says_where_each_value_was_read() -> None:
    [first, *_] = provenance.from_scrapes([("http://f:8000", BUILD_INFO)], "frontend", "frontend")
    assert first == Observed(
        "frontend.dynamo_build_info.version",
        "1.7.0",
        "frontend http://f:8000 GET /metrics dynamo_build_info{version}",
    )


def test_workers_that_agree_are_said_once_and_workers_that_differ_each_with_its_value() -> None:
    one = 'vllm:build_info{version="0.11.0"} 1\npython_info{version="3.12.3"} 1'
    two = 'vllm:build_info{version="0.11.0"} 1\npython_info{version="3.11.9"} 1'
    found = provenance.from_scrapes(
        [("http://a", one), ("http://b", two)], "worker", "worker system server"
    )
    assert found == [
        Observed(
            "worker.vllm:build_info.version",
            "0.11.0",
            "worker system server http://a, http://b GET /metrics vllm:build_info{version}",
        ),
        Observed(
            "worker.python_info.version",
            "3.12.3, 3.11.9",
            "worker system server GET /metrics python_info{version}, differing: "
            "3.12.3 at http://a; 3.11.9 at http://b",
        ),
    ]


def test_a_deployment_cannot_flood_the_report() -> None:
    lines = [f'x_{n}_info{{version="{"9" * 500}"}} 1' for n in range(200)]
    lines += [f'y_info{{version="{n}"}} 1' for n in range(20)]
    found = provenance.from_metrics("\n".join(lines), "worker")
    assert len(found) == provenance.MAX_KEYS
    assert all(len(v) <= provenance.MAX_VALUE_CHARS for vs in found.values() for v in vs)
    [value] = found["worker.x_0_info.version"]
    assert value.endswith("...")
    assert provenance.clean("1.0\n\x1b[31m") == "1.0  [31m"


def test_unparsable_metrics_record_nothing() -> None:
    assert provenance.from_metrics("", "frontend") == {}
    assert provenance.from_metrics("<html>not metrics</html>\n{version=1}", "frontend") == {}


def test_a_target_keeps_what_it_recorded_first() -> None:
    target = Target(id="t", backend="vllm", kind="dynamo", frontend_url="http://f")
    target.versions["ai-dynamo"] = "1.6.1"
    target.observe("dynamo", "1.6.1", "frontend GET /openapi.json info.version")
    target.observe("dynamo", "9.9.9", "elsewhere")
    assert target.versions == {"ai-dynamo": "1.6.1", "dynamo": "1.6.1"}
    assert target.version_sources == {"dynamo": "frontend GET /openapi.json info.version"}
    again = Target.from_description(target.describe())
    assert again.version_sources == target.version_sources and again.versions == target.versions
