"""Admitted values are judged with the precision the wire carries: the OpenAI surface's log
probabilities are float32, `nvext.engine_data` holds the engine's own values (real Dynamo 1.6.1
with vLLM: fixtures/dynamo-1.6.1/vllm-cpu/completions_rl_fields.json), and ids taken from the
raw engine payload are the engine's ids."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.certify.audit import AuditLog, Step
from rl_conformance.certify.evidence import Admission, Evidence
from rl_conformance.certify.generation_checks import engine_token_ids, logprob_alignment
from rl_conformance.certify.protocol import Sample
from rl_conformance.certify.scenarios import scenario
from rl_conformance.model.matrix import Outcome

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "dynamo-1.6.1" / "vllm-cpu"
ATTEMPT = "s1-attempt"


def _exchange(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / name).read_text())


def _evidence(request: dict[str, Any], reply: dict[str, Any], sample: Sample) -> Evidence:
    log = AuditLog()
    record = log.open("frontend", "POST", "/v1/completions", {"x-request-id": ATTEMPT}, request)
    record.status, record.response, record.finished = 200, reply, record.started + 0.1
    step = Step(0, "generate", "s1", record.started - 1, record.started + 1, "returned")
    return Evidence(scenario("iteration"), log, [step], [Admission(0, sample)])


def _sample(reply: dict[str, Any], ids: list[int], logprobs: list[Any]) -> Sample:
    return Sample(
        prompt_ids=(),
        token_ids=tuple(ids),
        logprobs=tuple(logprobs),
        finish_reason=reply["choices"][0]["finish_reason"],
        attempt_id=ATTEMPT,
    )


@pytest.fixture
def rl_fields() -> tuple[dict[str, Any], dict[str, Any]]:
    exchange = _exchange("completions_rl_fields.json")
    request = dict(exchange["request"]["body"], prompt=[])  # the sample's prompt ids: ()
    return request, exchange["response"]["body"]


def test_engine_values_and_float32_values_are_both_the_engines(
    rl_fields: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, reply = rl_fields
    engine = reply["nvext"]["engine_data"]
    wire = reply["choices"][0]["logprobs"]["token_logprobs"]
    assert engine["completion_logprobs"] != wire  # the recording's f64 against f32
    ids = reply["nvext"]["completion_token_ids"]
    for logprobs in (engine["completion_logprobs"], wire):
        finding = logprob_alignment(_evidence(request, reply, _sample(reply, ids, logprobs)))
        assert finding.outcome is Outcome.PASS, finding


@pytest.mark.parametrize("change", [1e-4, -1e-3])
def test_a_logprob_off_beyond_float32_fails(
    rl_fields: tuple[dict[str, Any], dict[str, Any]], change: float
) -> None:
    request, reply = rl_fields
    ids = reply["nvext"]["completion_token_ids"]
    logprobs = list(reply["nvext"]["engine_data"]["completion_logprobs"])
    logprobs[2] += change
    finding = logprob_alignment(_evidence(request, reply, _sample(reply, ids, logprobs)))
    assert finding.outcome is Outcome.FAIL
    assert "engine_data.completion_logprobs" in finding.message


def test_a_null_logprob_admitted_where_the_engine_gave_one_fails(
    rl_fields: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, reply = rl_fields
    ids = reply["nvext"]["completion_token_ids"]
    logprobs = [None, *reply["choices"][0]["logprobs"]["token_logprobs"][1:]]
    finding = logprob_alignment(_evidence(request, reply, _sample(reply, ids, logprobs)))
    assert finding.outcome is Outcome.FAIL


def test_ids_from_the_raw_engine_payload_are_the_engines(
    rl_fields: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, reply = rl_fields
    request = copy.deepcopy(request)
    request["nvext"]["extra_fields"] = ["engine_data"]
    reply = copy.deepcopy(reply)
    del reply["nvext"]["completion_token_ids"]  # asked for engine_data alone
    ids = reply["nvext"]["engine_data"]["completion_token_ids"]
    sample = _sample(reply, ids, reply["nvext"]["engine_data"]["completion_logprobs"])
    finding = engine_token_ids(_evidence(request, reply, sample))
    assert finding.outcome is Outcome.PASS, finding
    other = _sample(reply, [*ids[:-1], ids[-1] + 1], list(sample.logprobs))
    assert engine_token_ids(_evidence(request, reply, other)).outcome is Outcome.FAIL


def test_ids_asked_of_nothing_are_not_the_engines(
    rl_fields: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, reply = rl_fields
    request = copy.deepcopy(request)
    request["nvext"] = {}
    ids = reply["nvext"]["completion_token_ids"]
    finding = engine_token_ids(_evidence(request, reply, _sample(reply, ids, [])))
    assert finding.outcome is Outcome.FAIL
    assert "not requested from the engine" in finding.message


def test_logprobs_of_a_sample_traced_to_no_reply_are_never_exercised(
    rl_fields: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, reply = rl_fields
    ids = reply["nvext"]["completion_token_ids"]
    sample = dataclasses.replace(_sample(reply, ids, [0.0] * len(ids)), attempt_id="elsewhere")
    finding = logprob_alignment(_evidence(request, reply, sample))
    assert finding.outcome is Outcome.SKIPPED, finding  # not a pass on nothing compared
