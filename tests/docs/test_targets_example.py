"""The targets file the guide shows is one the run accepts as it stands: a vLLM fleet and an
SGLang fleet, one column each, the token named by its variable (the documented command runs it
against two fake fleets in `tests/e2e/test_readme_commands.py`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rl_conformance.launchers.run_plan import plan_run
from rl_conformance.model.config import RunConfig
from rl_conformance.redaction import REDACTOR

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "DEPLOYMENTS.md"


def test_the_documented_targets_file_plans_two_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (block,) = re.findall(r"^```toml\n(.*?)^```", GUIDE.read_text(), re.MULTILINE | re.DOTALL)
    (tmp_path / "fleets.toml").write_text(block)
    monkeypatch.setenv("SGLANG_TOKEN", "a-token-from-the-ci-secrets")
    try:
        plan = plan_run(RunConfig(targets=str(tmp_path / "fleets.toml")))
    finally:
        REDACTOR.forget()
    assert plan.pool.ids == ["vllm-prod", "sglang-prod"]
    assert [plan.pool.launchers[i].backend for i in plan.pool.ids] == ["vllm", "sglang"]
    assert plan.read_only_targets() == {"sglang-prod"}
    assert plan.policy_for("external", "vllm-prod").workers == frozenset({7587886443219045121})
    assert len(plan.inputs_for("vllm-prod").update_model_path) == 2
    assert plan.credentials_for("sglang-prod").given and not plan.credentials_for("vllm-prod").given
