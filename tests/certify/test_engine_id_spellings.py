"""The engine's ids however a client asks for them: by name (`nvext.extra_fields`), or vLLM's
way (`return_tokens_as_token_ids` with logprobs: each selected token spelled `token_id:<id>`,
which is the id itself, never text to encode again); and samples a client sends without identity
traced to the reply of their own rollout, so that identical replies leave nothing untraced."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.certify import hard_replies
from rl_conformance.certify.audit import AuditLog, AuditRecord, Step
from rl_conformance.certify.evidence import Admission, Evidence
from rl_conformance.certify.fleets import SGLANG_FLEET, VLLM_FLEET
from rl_conformance.certify.generation_checks import (
    engine_token_ids,
    logprob_alignment,
    verified_terminal_only,
)
from rl_conformance.certify.protocol import GENERATION, REFRESH, Sample
from rl_conformance.certify.replies import asks_engine_ids, carries_tokens, engine_ids
from rl_conformance.certify.scenarios import SCENARIOS, scenario
from rl_conformance.certify.testing import assert_passed

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "dynamo-1.6.1" / "vllm-cpu"
SPELLED = ROOT / "fixtures" / "framework_clients" / "token-ids-as-text"
PROMPT = [1, 450, 3000, 1271, 9999, 17, 2048, 777]


def _real(name: str, directory: Path = SPELLED) -> dict[str, Any]:
    return json.loads((directory / f"{name}.json").read_text())


def _vllm_way(stream: bool = False) -> tuple[dict[str, Any], Any, list[int]]:
    """(request body, reply, the engine's ids) of a completion asked for vLLM's way, as real
    Dynamo 1.6.1 + vLLM 0.31 answered it; the ids are those it named when asked by name too."""
    name = "completions_stream_token_ids_as_text" if stream else "completions_token_ids_as_text"
    document = _real(name)
    named = _real("completions_token_ids_as_text_with_named")["response"]["body"]
    response = document["response"]
    reply = response["sse_events"] if stream else response["body"]
    return document["request"]["body"], reply, list(named["nvext"]["completion_token_ids"])


def _record(seq: int, body: dict[str, Any], reply: Any, at: float, **headers: str) -> AuditRecord:
    record = AuditRecord(seq, "frontend", "POST", "/v1/completions", headers, body, at, status=200)
    if isinstance(reply, list):
        record.events = reply
    else:
        record.response = reply
    record.finished = at + 0.1
    return record


def _evidence(records: list[AuditRecord], admissions: list[Admission]) -> Evidence:
    log = AuditLog()
    for record in records:
        log.adopt(record)
    steps = [
        Step(i, "generate", f"s{i + 1}", float(i), i + 0.9, "returned") for i in range(len(records))
    ]
    generation = frozenset({GENERATION})
    return Evidence(scenario("iteration"), log, steps, admissions, implements=generation)


def _sample(ids: list[int], reply: Any, attempt: str = "") -> Sample:
    payloads = reply if isinstance(reply, list) else [reply]
    logprobs = [
        lp
        for p in payloads
        if isinstance(p, dict)
        for c in p.get("choices") or []
        for lp in (c.get("logprobs") or {}).get("token_logprobs") or []
    ]
    return Sample(tuple(PROMPT), tuple(ids), tuple(logprobs), "length", attempt, model="tiny")


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
def test_ids_spelled_token_id_are_the_engines(stream: bool) -> None:
    body, reply, ids = _vllm_way(stream)
    record = _record(0, body, reply, 0.0)
    assert asks_engine_ids(body)
    assert engine_ids(record) == ids
    if stream:
        assert sum(carries_tokens(record, event) for event in reply) == len(ids)


def test_chat_entries_spelled_token_id_are_the_engines() -> None:
    document = _real("chat_token_ids_as_text")
    body, reply = document["request"]["body"], document["response"]["body"]
    record = AuditRecord(0, "frontend", "POST", "/v1/chat/completions", {}, body, 0.0, status=200)
    record.response = copy.deepcopy(reply)
    record.response.pop("nvext")  # the spelled ids alone
    assert asks_engine_ids(body)
    assert engine_ids(record) == reply["nvext"]["completion_token_ids"]


def test_without_logprobs_no_token_spells_an_id() -> None:
    document = _real("completions_token_ids_as_text_no_logprobs")
    body, reply = document["request"]["body"], document["response"]["body"]
    assert not asks_engine_ids(body)
    assert engine_ids(_record(0, body, reply, 0.0)) is None


def test_text_tokens_are_no_ids() -> None:
    document = _real("completions_logprobs_0", REAL)
    record = _record(0, document["request"]["body"], document["response"]["body"], 0.0)
    assert engine_ids(record) is None  # " kozit" is text, not an id
    _, reply, _ = _vllm_way()
    reply["choices"][0]["logprobs"]["tokens"][2] = "johuk"
    assert engine_ids(_record(0, {}, reply, 0.0)) is None  # one token text: none is trusted


@pytest.mark.parametrize(
    ("change", "asked"),
    [
        ({}, True),
        ({"logprobs": None}, False),  # no logprobs: no tokens to spell the ids
        ({"logprobs": False}, False),
        ({"return_tokens_as_token_ids": False}, False),
        ({"return_tokens_as_token_ids": False, "nvext": {"extra_fields": ["engine_data"]}}, True),
    ],
)
def test_what_asks_for_the_engines_ids(change: dict[str, Any], asked: bool) -> None:
    body, _, _ = _vllm_way()
    assert asks_engine_ids(body | change) is asked


def test_a_reply_without_ids_keeps_none_spelled() -> None:
    _, reply, _ = _vllm_way()
    assert engine_ids(_record(0, {}, hard_replies.without_ids(reply), 0.0)) is None


def test_a_client_asking_vllms_way_passes_on_the_engines_ids() -> None:
    body, reply, ids = _vllm_way()
    record = _record(0, body, reply, 0.0, **{"x-request-id": "a-1"})
    evidence = _evidence([record], [Admission(0, _sample(ids, reply, "a-1"))])
    found = engine_token_ids(evidence)
    assert found.outcome == "pass" and "1 admitted sample(s) traced" in found.message
    assert logprob_alignment(evidence).outcome == "pass"


def test_ids_not_the_spelled_ones_fail() -> None:
    body, reply, ids = _vllm_way()
    record = _record(0, body, reply, 0.0, **{"x-request-id": "a-1"})
    evidence = _evidence([record], [Admission(0, _sample([*ids[:-1], 4], reply, "a-1"))])
    found = engine_token_ids(evidence)
    assert found.outcome == "fail" and found.expected == ids


def test_the_ids_not_asked_for_fail_naming_both_ways() -> None:
    body, reply, ids = _vllm_way()
    body.pop("logprobs")
    evidence = _evidence([_record(0, body, reply, 0.0)], [Admission(0, _sample(ids, reply))])
    found = engine_token_ids(evidence)
    assert found.outcome == "fail" and "return_tokens_as_token_ids" in str(found.expected)


def test_identical_replies_trace_each_sample_to_its_own_rollout() -> None:
    """Two rollouts of the same prompt, no identity on the wire (the toy is deterministic, as a
    greedy engine is): each sample is judged on its own rollout's reply."""
    body, reply, ids = _vllm_way()
    records = [_record(0, body, reply, 0.1), _record(1, body, copy.deepcopy(reply), 1.1)]
    admissions = [Admission(0, _sample(ids, reply)), Admission(1, _sample(ids, reply))]
    evidence = _evidence(records, admissions)
    assert "2 admitted sample(s) traced" in engine_token_ids(evidence).message
    records[1].response["choices"][0]["finish_reason"] = None
    found = verified_terminal_only(evidence)  # the second reply was no terminal success
    assert found.outcome == "fail" and "#1" in found.message


def test_a_shim_identity_that_never_went_on_the_wire_traces_by_rollout() -> None:
    body, reply, ids = _vllm_way()
    evidence = _evidence([_record(0, body, reply, 0.1)], [Admission(0, _sample(ids, reply, "r"))])
    assert verified_terminal_only(evidence).outcome == "pass"
    with_identity = _record(0, body, reply, 0.1, **{"x-request-id": "other"})
    evidence = _evidence([with_identity], [Admission(0, _sample(ids, reply, "r"))])
    found = verified_terminal_only(evidence)  # an identity the client does send: must match
    assert found.outcome == "fail" and "names no request" in found.message


def test_a_client_that_only_generates_runs_every_scenario_on_every_fleet() -> None:
    both = frozenset({GENERATION, REFRESH})
    for fleet in (VLLM_FLEET, SGLANG_FLEET):
        assert all(s.unsupported(fleet, frozenset({GENERATION})) is None for s in SCENARIOS)
    unstaged = {s.name for s in SCENARIOS if s.unsupported(SGLANG_FLEET, both) is not None}
    assert "worker_leaves" in unstaged and "iteration" not in unstaged


def test_the_fixture_skips_a_scenario_that_exercised_nothing() -> None:
    from rl_conformance.certify.findings import Finding
    from rl_conformance.certify.runner import ScenarioResult

    findings = [Finding("adapter.attempt_identity", "skipped", "never exercised: nothing sent")]
    result = ScenarioResult("a", scenario("iteration"), findings, [], [], 0.0)
    with pytest.raises(pytest.skip.Exception, match="no checklist item was exercised"):
        assert_passed(result)
    passed = ScenarioResult(
        "a", scenario("iteration"), [Finding("adapter.attempt_identity", "pass", "ok")], [], [], 0.0
    )
    assert_passed(passed)
