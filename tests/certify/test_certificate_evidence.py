"""Nothing is certified on absence: a rollout client that produces nothing on a healthy fleet
fails, naming its exception (type, message, its own frame) or the status and path it was
answered, on the console and in matrix.md, and the command exits non-zero; an item no scenario
exercised is `never exercised`, which fails the certificate too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from rl_conformance.certify import AdapterContext, RolloutRequest, Sample
from rl_conformance.certify.fleets import SGLANG_FLEET
from rl_conformance.certify.runner import run_scenario
from rl_conformance.certify.scenarios import scenario

from .cli_runs import run_cli

pytestmark = pytest.mark.slow
CHECK = "adapter.generation_reaches_backend"
MODULE = "tests.certify.test_certificate_evidence"


class RaisesOnEveryRollout:
    """A first draft that reads a field the reply does not have."""

    implements = frozenset({"generation"})

    def __init__(self, context: AdapterContext) -> None:
        self.context = context
        self.http = httpx.Client(timeout=context.request_timeout_s)

    def body(self, request: RolloutRequest) -> dict[str, Any]:
        return {
            "model": self.context.model,
            "prompt": list(request.prompt_ids),
            "max_tokens": request.max_tokens,
            "logprobs": 0,
            "nvext": {"extra_fields": ["completion_token_ids"]},
        }

    def generate(self, request: RolloutRequest) -> Sample | None:
        reply = self.http.post(
            self.context.frontend_url + "/v1/completions",
            json=self.body(request),
            headers={"x-request-id": f"{request.slot}-{id(request)}"},
        ).json()
        return reply["samples"][0]

    def close(self) -> None:
        self.http.close()


class PostsToAMistypedPath(RaisesOnEveryRollout):
    def generate(self, request: RolloutRequest) -> Sample | None:
        self.http.post(
            self.context.frontend_url + "/v1/completion",
            json=self.body(request),
            headers={"x-request-id": f"{request.slot}-{id(request)}"},
        )
        return None


class GeneratesThroughVllmsNativeRoute(RaisesOnEveryRollout):
    """Rollouts through `/inference/v1/generate`, as SkyRL's remote inference client sends them:
    right on a Dynamo vLLM deployment whose workers turn the route on."""

    def generate(self, request: RolloutRequest) -> Sample | None:
        body = {"model": self.context.model, "token_ids": list(request.prompt_ids)}
        reply = self.http.post(self.context.frontend_url + "/inference/v1/generate", json=body)
        reply.raise_for_status()
        return None


def test_a_route_a_deployment_serves_when_told_to_is_not_judged_on_the_fleet() -> None:
    result = run_scenario("native", GeneratesThroughVllmsNativeRoute, scenario("iteration"))
    (finding,) = [f for f in result.findings if f.check_id == CHECK]
    assert finding.outcome == "skipped", finding
    assert "DYN_VLLM_ENABLE_INFERENCE_V1_GENERATE=1" in finding.message
    assert "POST frontend/inference/v1/generate -> 404" in finding.message
    sglang = run_scenario(
        "native", GeneratesThroughVllmsNativeRoute, scenario("iteration"), SGLANG_FLEET
    )  # no SGLang worker serves vLLM's route: the client's own defect there
    assert next(f for f in sglang.findings if f.check_id == CHECK).outcome == "fail"


def test_a_rollout_that_raises_fails_naming_the_exception_and_its_frame() -> None:
    result = run_scenario("raises", RaisesOnEveryRollout, scenario("iteration"))
    (finding,) = [f for f in result.findings if f.check_id == CHECK]
    assert finding.outcome == "fail"
    assert "KeyError: 'samples'" in finding.message
    assert "test_certificate_evidence.py:" in finding.message and "in generate" in finding.message


def test_a_rollout_sent_to_a_mistyped_path_fails_naming_status_and_path() -> None:
    result = run_scenario("mistyped", PostsToAMistypedPath, scenario("iteration"))
    findings = {f.check_id: f for f in result.findings}
    assert findings[CHECK].outcome == "fail"
    assert "POST /v1/completion -> 404" in findings[CHECK].message
    identity = findings["adapter.attempt_identity"]
    assert identity.outcome == "skipped"
    assert "POST /v1/completion -> 404" in identity.message  # sent, to no generation route


def test_a_faithful_rollout_client_passes_the_item() -> None:
    from examples.my_adapter import MyAdapter

    result = run_scenario("faithful", MyAdapter, scenario("iteration"))
    (finding,) = [f for f in result.findings if f.check_id == CHECK]
    assert finding.outcome == "pass", finding


def test_the_command_exits_non_zero_and_shows_why(tmp_path: Path) -> None:
    done = run_cli(
        tmp_path,
        f"{MODULE}:RaisesOnEveryRollout",
        f"{MODULE}:PostsToAMistypedPath",
        "--scenario",
        "iteration",
        "--scenario",
        "late_completion",
    )
    assert done.returncode == 1
    assert "KeyError: 'samples'" in done.stdout and "POST /v1/completion -> 404" in done.stdout
    assert "never exercised" in done.stdout  # e.g. no sample was ever admitted to judge
    report = (tmp_path / "matrix.md").read_text()
    assert "KeyError: 'samples'" in report and "POST /v1/completion -> 404" in report
