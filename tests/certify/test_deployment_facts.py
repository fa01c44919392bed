"""The deployment is the author's: `certify-adapter --engine-route` stages the client's own SGLang
allowlist and `--served-model` its model name. A call to an engine route the staged deployment
does not serve is not the client's defect (its refresh items say "not judged", naming the route
and the option), unless no deployment could serve it: a path expected to run whichever method
the body names fails route negotiation."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance.certify.fleets import FLEETS, SGLANG_FLEET, VLLM_FLEET, with_facts
from rl_conformance.certify.replay import evidence_from_json, rejudge
from rl_conformance.certify.runner import ScenarioResult, run_scenario
from rl_conformance.certify.scenarios import scenario
from rl_conformance.errors import ConfigurationError

from . import kit_adapters
from .cli_runs import certify

pytestmark = pytest.mark.slow
SERVER_INFO = (*SGLANG_FLEET.engine_routes, "server_info=get_server_info")


def _outcomes(result: ScenarioResult) -> dict[str, tuple[str, str]]:
    return {f.check_id: (f.outcome, f.message) for f in result.findings}


def test_a_route_the_staged_deployment_lacks_is_not_the_clients_defect() -> None:
    reads = kit_adapters.ReadsServerInfo
    result = run_scenario("reads", reads, scenario("iteration"), SGLANG_FLEET)
    outcomes = _outcomes(result)
    assert not result.failed
    for item in ("adapter.complete_iteration", "adapter.mutations_to_advertised"):
        outcome, message = outcomes[item]
        assert outcome == "skipped"
        assert "/engine/server_info" in message and "--engine-route server_info" in message


def test_the_authors_allowlist_stages_the_route_and_the_refresh_is_judged() -> None:
    fleet = with_facts(SGLANG_FLEET, SERVER_INFO)
    assert "server_info" in fleet.served and fleet.flush == "flush_cache"
    result = run_scenario("reads", kit_adapters.ReadsServerInfo, scenario("iteration"), fleet)
    outcomes = _outcomes(result)
    assert not result.failed
    assert outcomes["adapter.complete_iteration"][0] == "pass"
    assert outcomes["adapter.mutations_to_advertised"][0] == "pass"
    assert result.evidence is not None
    assert result.evidence["engine_routes"] == list(SERVER_INFO)
    replayed = evidence_from_json(result.evidence)
    assert replayed.fleet.served == fleet.served  # judged again on the recorded deployment
    assert [f.outcome for f in rejudge(result.evidence)] == [f.outcome for f in result.findings]


def test_a_path_whose_body_names_the_method_fails_route_negotiation() -> None:
    passthrough = kit_adapters.TokenizerManagerPassthrough
    result = run_scenario("passthrough", passthrough, scenario("iteration"), SGLANG_FLEET)
    outcome, message = _outcomes(result)["adapter.mutations_to_advertised"]
    assert outcome == "fail"
    assert "call_tokenizer_manager" in message and "pause_generation" in message
    assert "the body never chooses it" in message


def test_a_served_model_name_is_served_and_handed_to_the_client() -> None:
    fleet = with_facts(VLLM_FLEET, model="Qwen/Qwen3-0.6B")
    result = run_scenario("reference", kit_adapters.ReferenceAdapter, scenario("iteration"), fleet)
    assert not result.failed and result.evidence is not None
    records = evidence_from_json(result.evidence).records
    generations = [r for r in records if r.is_generation]
    assert generations and all(r.body["model"] == "Qwen/Qwen3-0.6B" for r in generations)
    assert all(r.status == 200 for r in generations)


@pytest.mark.parametrize(
    ("family", "routes", "model", "expected"),
    [
        ("vllm", ("flush_cache",), None, "the vllm family has none"),
        ("sglang", ("a=b=c",), None, "expected at most one '='"),
        ("sglang", ("no_such_method",), None, "its SGLang engine has the methods"),
        ("sglang", None, " ", "--served-model: expected a model name"),
    ],
)
def test_facts_a_fleet_cannot_have_are_refused_by_name(
    family: str, routes: Any, model: Any, expected: str
) -> None:
    with pytest.raises(ConfigurationError, match=expected):
        with_facts(FLEETS[family], routes, model)


def test_the_command_takes_the_deployments_facts(tmp_path: Any) -> None:
    code, _, audits = certify(
        tmp_path,
        "tests.certify.kit_adapters:ReadsServerInfo",
        "--family",
        "sglang",
        *(arg for route in SERVER_INFO for arg in ("--engine-route", route)),
        "--served-model",
        "my-policy",
        "--scenario",
        "iteration",
    )
    assert code == 0, audits
    assert any("my-policy" in str(audit) for audit in audits)
