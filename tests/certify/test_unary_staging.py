"""stream_cut and cancellation stage their event for streamed and unary clients alike: the
first reply is cut (a stream after two events, a unary reply mid-body), the first rollout is
cancelled in flight (mid-stream, or while its unary reply is held). A run in which the event
did not happen reports the scenario's item not staged, never passed."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from examples.my_adapter import MyAdapter
from fake_backends import FakeDeployment
from rl_conformance.certify.audit import AuditLog, AuditRecord
from rl_conformance.certify.findings import Finding
from rl_conformance.certify.fleet_events import FirstStreamCut
from rl_conformance.certify.fleets import VLLM_FLEET
from rl_conformance.certify.protocol import AdapterFactory
from rl_conformance.certify.proxy import RecordingProxy
from rl_conformance.certify.reference import ReferenceAdapter
from rl_conformance.certify.replay import evidence_from_json, rejudge
from rl_conformance.certify.runner import ScenarioResult, run_scenario
from rl_conformance.certify.scenarios import scenario

from . import kit_adapters

pytestmark = pytest.mark.slow
CLIENTS: dict[str, AdapterFactory] = {"streamed": ReferenceAdapter, "unary": MyAdapter}
VERIFIED = "adapter.verified_terminal_only"


def _failed(result: ScenarioResult) -> list[str]:
    return sorted(finding.check_id for finding in result.failed)


def _generations(result: ScenarioResult) -> list[AuditRecord]:
    assert result.evidence is not None
    return [r for r in evidence_from_json(result.evidence).records if r.is_generation]


def _verdict(findings: list[Finding]) -> Finding:
    return next(finding for finding in findings if finding.check_id == VERIFIED)


@pytest.fixture(scope="module")
def unary_runs() -> dict[str, ScenarioResult]:
    return {
        name: run_scenario("unary", MyAdapter, scenario(name))
        for name in ("stream_cut", "cancellation")
    }


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_the_first_reply_is_cut_for_every_client(client: str) -> None:
    result = run_scenario(client, CLIENTS[client], scenario("stream_cut"))
    first, *later = _generations(result)
    assert (first.delivery, first.staged) == ("cut", True)
    assert later and all(r.delivery == "complete" for r in later)  # the retry and s2
    if client == "unary":
        assert first.events == [] and first.delivered_bytes is not None
        assert 0 < first.delivered_bytes < len(json.dumps(first.response))
    assert _failed(result) == []
    assert _verdict(result.findings).outcome == "pass"


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_the_first_rollout_is_cancelled_in_flight_for_every_client(client: str) -> None:
    result = run_scenario(client, CLIENTS[client], scenario("cancellation"))
    assert [step.cancelled for step in result.steps] == [True, False]
    first = _generations(result)[0]
    assert first.staged and first.held == (client == "unary")
    assert result.evidence is not None
    assert [a["step"] for a in result.evidence["admissions"]] == [1]
    assert _failed(result) == []
    assert _verdict(result.findings).outcome == "pass"


def test_a_unary_reply_cut_mid_body_is_a_transport_error_to_the_client() -> None:
    injection = FirstStreamCut(VLLM_FLEET)
    body = {"model": "toy", "prompt": [1, 2, 3], "max_tokens": 4}
    with (
        FakeDeployment(VLLM_FLEET.backend, workers=1, **VLLM_FLEET.options) as deployment,
        RecordingProxy({"frontend": deployment.frontend_url}, injection, AuditLog()) as proxy,
    ):
        injection.arm()
        url = proxy.url("frontend") + "/v1/completions"
        with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
            httpx.post(url, json=body, timeout=5)
        assert httpx.post(url, json=body, timeout=5).json()["choices"]


def test_a_unary_client_that_ignores_the_cancel_fails_only_there() -> None:
    cancelled = run_scenario("twin", kit_adapters.UnaryIgnoresCancel, scenario("cancellation"))
    assert _failed(cancelled) == [VERIFIED]
    assert _verdict(cancelled.findings).message == (
        "admitted a sample for slot s1, which the trainer cancelled"
    )
    cut = run_scenario("twin", kit_adapters.UnaryIgnoresCancel, scenario("stream_cut"))
    assert _failed(cut) == []


def _recorded(result: ScenarioResult) -> dict[str, Any]:
    assert result.evidence is not None
    return copy.deepcopy(result.evidence)


def test_admitting_a_cut_unary_reply_fails(unary_runs: dict[str, ScenarioResult]) -> None:
    document = _recorded(unary_runs["stream_cut"])
    cut = next(r for r in document["records"] if r["delivery"] == "cut")
    sample = document["admissions"][0]["sample"]
    document["admissions"][0]["sample"] = {**sample, "attempt_id": cut["headers"]["x-request-id"]}
    verdict = _verdict(rejudge(document))
    assert verdict.outcome == "fail" and "(cut)" in verdict.message


def test_a_reply_that_was_not_cut_is_not_staged(unary_runs: dict[str, ScenarioResult]) -> None:
    document = _recorded(unary_runs["stream_cut"])
    for record in document["records"]:
        if record["delivery"] == "cut":
            record.update(delivery="complete", delivered_bytes=None)
    verdict = _verdict(rejudge(document))
    assert verdict.outcome == "skipped"
    assert verdict.message.startswith("not staged: no generation reply was cut short")


def test_a_cancel_after_the_rollout_returned_is_not_staged(
    unary_runs: dict[str, ScenarioResult],
) -> None:
    document = _recorded(unary_runs["cancellation"])
    document["steps"][0]["cancelled"] = False
    verdict = _verdict(rejudge(document))
    assert (verdict.outcome, verdict.message) == (
        "skipped",
        "not staged: the trainer's cancel of slot s1 came after the rollout returned",
    )


def test_a_rollout_never_sent_is_not_staged(unary_runs: dict[str, ScenarioResult]) -> None:
    document = _recorded(unary_runs["cancellation"])
    step = document["steps"][0]
    document["steps"][0]["cancelled"] = False
    document["records"] = [
        r
        for r in document["records"]
        if not (step["started"] <= r["started"] <= step["finished"] and "completions" in r["path"])
    ]
    verdict = _verdict(rejudge(document))
    assert verdict.message == (
        "not staged: the adapter sent no generation request for slot s1 to cancel"
    )


@pytest.mark.parametrize(
    ("factory", "outcome"),
    [(MyAdapter, "pass"), (kit_adapters.UnaryNamesCurrentPolicy, "fail")],
)
def test_a_unary_rollout_is_overtaken_by_the_refresh(factory: AdapterFactory, outcome: str) -> None:
    """The refresh begins while the unary rollout is at the engine, and ends before its reply:
    naming that sample one policy's fails, leaving it unnamed passes."""
    result = run_scenario("unary", factory, scenario("refresh_during_rollout"))
    rollout, refresh = result.steps[0], result.steps[1]
    assert rollout.started < refresh.started and refresh.finished < rollout.finished
    found = next(f for f in result.findings if f.check_id == "adapter.one_policy_samples")
    assert found.outcome == outcome, found
    assert _failed(result) == (["adapter.one_policy_samples"] if outcome == "fail" else [])
