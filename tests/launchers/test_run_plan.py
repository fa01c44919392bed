"""A run's configuration is checked once, into the plan every later layer reads."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.cli import main
from rl_conformance.errors import ConfigurationError
from rl_conformance.launchers import run_plan
from rl_conformance.model.config import RunConfig


def test_a_run_from_the_command_line_checks_its_flags_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The flags are validated and the inputs checked once, before anything starts; the runner,
    the job count, the plugin and the budget read the plan."""
    calls: Counter[str] = Counter()
    validate, check_config = RunConfig.validate, run_plan.check_config

    def counted_validate(self: RunConfig) -> RunConfig:
        calls["validate"] += 1
        return validate(self)

    def counted_check(config: RunConfig) -> None:
        calls["check_config"] += 1
        check_config(config)

    monkeypatch.setattr(RunConfig, "validate", counted_validate)
    monkeypatch.setattr(run_plan, "check_config", counted_check)
    code = main(["run", "--dry-run", "-q", "--fake", "vllm", "--report-dir", str(tmp_path)])
    capsys.readouterr()
    assert code == 0
    assert calls == {"validate": 1, "check_config": 1}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fault": ("no_such_fault",)}, "--fault"),
        ({"capability": ("no.such",)}, "no.such"),
        ({"worker": (1,)}, "--allow-mutations"),
    ],
)
def test_a_wrong_configuration_has_no_plan(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        run_plan.plan_run(RunConfig(**options))


def test_our_fakes_may_be_tested_as_several_deployments_each_unless_a_budget_is_shared() -> None:
    import os

    from rl_conformance.plugin.balance import planned_groups
    from rl_conformance.plugin.runner import JOBS_PER_CORE, MAX_JOBS, parallel_jobs

    default = run_plan.plan_run(RunConfig())
    assert default.split_targets() == set(default.pool.ids)
    groups = planned_groups(default.pool.ids, default.split_targets())
    assert groups > len(default.pool.ids)
    assert parallel_jobs(default) == min(groups, MAX_JOBS, JOBS_PER_CORE * (os.cpu_count() or 1))
    budgeted = run_plan.plan_run(RunConfig(budget_generations=100))
    assert budgeted.split_targets() == set()
    assert planned_groups(budgeted.pool.ids, budgeted.split_targets()) == len(budgeted.pool.ids)
    external = run_plan.plan_run(RunConfig(frontend="http://127.0.0.1:1", backend="vllm"))
    assert external.split_targets() == set()
    assert parallel_jobs(external) == 1
