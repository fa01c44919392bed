"""Replay the requests recorded against the real Dynamo 1.6.1 and compare response shapes.

The recordings (``fixtures/dynamo-1.6.1/toy-worker``) come from the real frontend in
front of a different toy engine, so values differ; status codes, content types, echoed
headers and the JSON *shape* (keys, nesting, value types) must not.  Engine-owned
payloads (``nvext.engine_data`` and SGLang ``meta_info`` extras) are the engine's own
choice and are compared loosely.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_backend_helpers import parse_sse

from fake_backends.deployment.assembly import FakeDeployment

RECORDINGS = Path(__file__).resolve().parents[2] / "fixtures" / "dynamo-1.6.1" / "toy-worker"

# Cases whose shape depends on what the engine generated or on behaviour the fake does
# not model, with the reason.
SKIPPED = {
    "completions_stop_string": "whether the toy's stop string occurs depends on its vocabulary",
    "completions_eos_extra_fields_all": "EOS position depends on the engine (stop_reason key)",
    "completions_stream_eos_extra_fields_all": "EOS position depends on the engine",
}
EXCLUDED_PREFIXES = (
    "flow_",
    "worker_gone_",
    "no_model_",
    "vllm_inference_v1_generate",
    "metrics",
    "worker_metrics",  # text cut to a few series; tests/harness/test_prometheus reads them
    "frontend_metrics",
)
LOOSE_KEYS = {"engine_data"}  # engine-owned, forwarded verbatim by the frontend
# The recording engine sent no prompt_tokens_details (observed §6.11); the fake's vLLM and
# SGLang workers report cache hits like the mocker does (test_usage_details_match_mocker).
ENGINE_USAGE_EXTRAS = {"prompt_tokens_details"}
SGLANG_META_EXTRAS = {"cached_tokens", "weight_version"}


def _cases() -> list[str]:
    if not RECORDINGS.is_dir():
        return []
    names = sorted(p.stem for p in RECORDINGS.glob("*.json"))
    return [n for n in names if not n.startswith(EXCLUDED_PREFIXES)]


def _key(shape: Any) -> str:
    return json.dumps(shape, sort_keys=True)  # JSON key order carries no meaning


def sig(value: Any, key: str = "") -> Any:
    """A value's shape: dict keys with their shapes, list element shapes, scalar types."""
    if isinstance(value, dict):
        if key in LOOSE_KEYS:
            return "object"
        if value and (key == "top_logprobs" or all(k.isdigit() for k in value)):
            return {"<map>": sorted({_key(sig(v)) for v in value.values()})}
        out = {k: sig(v, k) for k, v in value.items()}
        if key == "usage":
            for extra in ENGINE_USAGE_EXTRAS:
                out.pop(extra, None)
        if key == "meta_info":
            for extra in SGLANG_META_EXTRAS:
                out.pop(extra, None)
        return out
    if isinstance(value, list):
        return ["list", sorted({_key(sig(v, key)) for v in value})]
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if value is None:
        return "null"
    return "str"


def _replay(client: httpx.Client, dep: FakeDeployment, request: dict[str, Any]) -> httpx.Response:
    target = request["target"]
    base = {"frontend": dep.frontend_url, "rl": dep.rl_url}.get(target)
    if base is None:
        base = dep.workers[0]["system_url"]
    headers = dict(request.get("headers") or {})
    if "raw_body" in request:
        content = request["raw_body"].encode()
    elif request.get("body") is not None:
        content = json.dumps(request["body"]).encode()
    else:
        content = None
    return client.request(
        request["method"], base + request["url_path"], content=content, headers=headers
    )


def _event_shapes(events: list[Any]) -> tuple[Any, Any, list[str], bool]:
    chunks = [e for e in events if e != "[DONE]"]
    return (
        sig(chunks[0]) if chunks else None,
        sig(chunks[-1]) if chunks else None,
        sorted({_key(sig(c)) for c in chunks}),
        bool(events) and events[-1] == "[DONE]",
    )


@pytest.mark.parametrize(
    "case", _cases() or [pytest.param("none", marks=pytest.mark.skip("no recordings"))]
)
def test_shape_matches_recording(
    case: str, client: httpx.Client, vllm: FakeDeployment, sglang: FakeDeployment
) -> None:
    if case in SKIPPED:
        pytest.skip(SKIPPED[case])
    recorded = json.loads((RECORDINGS / f"{case}.json").read_text())
    request, expected = recorded["request"], recorded["response"]
    dep = sglang if case.startswith("sglang_") else vllm
    got = _replay(client, dep, request)
    assert got.status_code == expected["status"], got.text[:300]
    for name, value in expected["headers"].items():
        assert got.headers.get(name) == value, name
    if "content-type" not in expected["headers"]:
        assert "content-type" not in got.headers
    if expected.get("sse_events") is not None:
        assert _event_shapes(parse_sse(got.text)) == _event_shapes(expected["sse_events"])
    elif expected["body"] is not None:
        assert sig(json.loads(got.text)) == sig(expected["body"])
    else:
        assert got.text == (expected.get("text") or "")


MOCKER = RECORDINGS.parent / "mocker"
USAGE_CASES = [
    "completions_extra_fields_all",
    "completions_stream_include_usage",
    "chat_basic",
    "chat_stream_include_usage",
]


def _usages(response: dict[str, Any]) -> list[dict[str, Any]]:
    found = [response["body"]["usage"]] if isinstance(response.get("body"), dict) else []
    for event in response.get("sse_events") or []:
        if isinstance(event, dict) and event.get("usage"):
            found.append(event["usage"])
    return found


@pytest.mark.parametrize("case", USAGE_CASES)
def test_usage_details_match_mocker(case: str, client: httpx.Client, vllm: FakeDeployment) -> None:
    """The mocker reports cache hits; its usage shape is the one the fake follows."""
    path = MOCKER / f"{case}.json"
    if not path.is_file():
        pytest.skip("no mocker recordings")
    recorded = json.loads(path.read_text())
    got = _replay(client, vllm, recorded["request"])
    if recorded["response"].get("sse_events") is not None:
        mine = _usages({"sse_events": parse_sse(got.text)})
    else:
        mine = _usages({"body": got.json()})
    expected = _usages(recorded["response"])
    assert len(mine) == len(expected) == 1
    assert sig(mine[0]["prompt_tokens_details"]) == sig(expected[0]["prompt_tokens_details"])
