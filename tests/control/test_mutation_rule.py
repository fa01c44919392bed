"""The run's one mutation rule: which targets' workers a run may change, from its flags alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rl_conformance.launchers.run_plan import plan_run
from rl_conformance.model.config import RunConfig
from rl_conformance.model.mutations import MutationRule

PACKAGE = Path(__file__).resolve().parents[2] / "rl_conformance"


@pytest.mark.parametrize(
    ("flags", "fake", "external"),
    [
        ({}, "mutations allowed on every worker", "read-only run"),
        ({"read_only": True}, "read-only run", "read-only run"),
        (
            {"allow_mutations": True, "all_workers": True},
            "mutations allowed on every worker",
            "mutations allowed on every worker",
        ),
        (
            {"allow_mutations": True, "worker": (7,)},
            "mutations allowed on workers [7]",
            "mutations allowed on workers [7]",
        ),
    ],
)
def test_our_fakes_may_be_changed_and_a_users_deployment_only_when_the_user_says(
    flags: dict[str, object], fake: str, external: str
) -> None:
    rule = MutationRule.from_config(RunConfig(**flags))  # type: ignore[arg-type]
    assert rule.for_target("fake").describe() == fake
    for kind in ("external", "dynamo", "docker"):
        assert rule.for_target(kind).describe() == external


def test_the_budget_reads_the_same_rule_before_any_target_started() -> None:
    """A mutating test of a target the rule keeps read-only is stopped before it generates:
    the plan answers from each launcher's kind, as the rule answers once the target started."""
    mixed = plan_run(RunConfig(fake=("vllm",), frontend="http://127.0.0.1:1", backend="vllm"))
    assert mixed.read_only_targets() == {"external-vllm"}
    assert plan_run(RunConfig(read_only=True)).read_only_targets() == set(
        plan_run(RunConfig()).pool.ids
    )
    granted = RunConfig(
        frontend="http://127.0.0.1:1", backend="vllm", allow_mutations=True, all_workers=True
    )
    assert plan_run(granted).read_only_targets() == set()


def test_no_module_but_the_rules_own_decides_on_a_targets_kind() -> None:
    """ "May this run change this target?" is answered in one place: no other module compares a
    target's or launcher's kind with "fake" or tests a launcher's class for it."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "mutations.py" and path.parent.name == "model":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Constant) and side.value == "fake"
                for side in (node.left, *node.comparators)
            ):
                left = ast.unparse(node.left)
                if left.endswith("kind") and path.name != "weights.py":
                    offenders.append(
                        f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}"
                    )
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func) == "isinstance"
                and "FakeLauncher" in ast.unparse(node)
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []
