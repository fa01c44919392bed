"""The plan a budget makes for the suites on the default fakes (`--dry-run` plans: nothing is
started): the budget `--dry-run` names covers every capability the full run covers, a smaller
one covers MUST rows first and one test per row before any second test, a read-only run charges
nothing for its mutating tests; and a property test runs with the examples its plan gives it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_conformance.client.budget import FEWEST_EXAMPLES, START_GENERATIONS, PlannedTest, cost_of
from rl_conformance.launchers.run_plan import plan_run
from rl_conformance.model import capabilities as capability_registry
from rl_conformance.model.config import RunConfig
from rl_conformance.plugin.budgeting import _examples
from rl_conformance.plugin.runner import run

REFRESH_MODULES = (
    "test_refresh_gating.py",
    "test_refresh_kept_requests.py",
    "test_refresh_reported_versions.py",
    "test_refresh_served_weights.py",
    "test_refresh_stale_cache.py",
    "test_refresh_state_machine.py",
    "test_refresh_streams_in_flight.py",
)
MUTATING_MODULES = (
    *REFRESH_MODULES,
    "test_namespace.py",
    "test_administration.py",
    "test_pause_control.py",
    "test_pause_modes.py",
    "test_membership.py",
    "test_recovery.py",
    "test_migration.py",
    "test_weight_gauge.py",
    "test_version_declaration.py",
    "test_listener_probes.py",
    "test_distributed_update.py",
)


def dry_plan(directory: Path, **options: Any) -> dict[str, Any]:
    run(plan_run(RunConfig(dry_run=True, report_dir=str(directory), **options)), verbosity="quiet")
    return json.loads((directory / "plan.json").read_text())


def is_refresh(test: dict[str, Any]) -> bool:
    return test["nodeid"].split("::")[0].endswith(REFRESH_MODULES)


def by_target(plan: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for test in plan["tests"]:
        found.setdefault(test["target"], []).append(test)
    return found


def covered(tests: list[dict[str, Any]]) -> set[str]:
    return {c for test in tests if test["selected"] for c in test["capabilities"]}


def least(test: dict[str, Any]) -> int:
    """What the plan can charge a test at the least: a property test at its fewest examples."""
    if test.get("read_only"):
        return 0
    cost = cost_of(test["nodeid"], test["target"])
    examples = min(FEWEST_EXAMPLES, test["examples"]) if "examples" in test else 0
    return cost.estimate(examples) if cost.per_example > 0 else test["estimated_generations"]


def is_must(capability_id: str) -> bool:
    return capability_registry.BY_ID[capability_id].level.value == "MUST"


@pytest.fixture(scope="module")
def full_plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return dry_plan(tmp_path_factory.mktemp("full"))


def test_the_budget_a_dry_run_names_covers_every_capability(
    full_plan: dict[str, Any], tmp_path: Path
) -> None:
    full = by_target(full_plan)
    assert set(full) == {"fake-vllm", "fake-sglang", "fake-trtllm", "fake-vllm-sidecar"}
    figures = {t: entry["coverage"] for t, entry in full_plan["targets"].items()}
    assert full_plan["coverage_generations"] == max(f["generations"] for f in figures.values())
    for target_id, figure in figures.items():
        assert figure["capabilities"] == len(covered(full[target_id])) > 30
        assert START_GENERATIONS < figure["generations_fewest_examples"] <= figure["generations"]
        assert figure["generations"] < full_plan["targets"][target_id]["estimated_generations"]
    for key in ("generations", "generations_fewest_examples"):
        budget = max(f[key] for f in figures.values())
        plan = dry_plan(tmp_path / key, budget_generations=budget)
        for target_id, tests in by_target(plan).items():
            assert covered(tests) == covered(full[target_id]), (key, target_id)
            assert plan["targets"][target_id]["uncovered_capabilities"] == []
            spent = START_GENERATIONS + sum(
                t["estimated_generations"] for t in tests if t["selected"]
            )
            assert spent <= budget
            if key == "generations" and budget == figures[target_id]["generations"]:
                # exactly the figure: each row's first test runs whole
                first = [t for t in tests if t.get("covers_first") and "examples" in t]
                assert first and all(t["examples"] == plan["examples"] for t in first)


@pytest.mark.parametrize("fraction", [0.3, 0.6])
def test_a_smaller_budget_covers_must_rows_first_and_each_row_once_first(
    full_plan: dict[str, Any], tmp_path: Path, fraction: float
) -> None:
    fewest = min(
        e["coverage"]["generations_fewest_examples"] for e in full_plan["targets"].values()
    )
    budget = int(fewest * fraction)
    plan = dry_plan(tmp_path, budget_generations=budget)
    for target_id, tests in by_target(plan).items():
        every = {c for test in tests for c in test["capabilities"]}
        uncovered = set(plan["targets"][target_id]["uncovered_capabilities"])
        assert uncovered == every - covered(tests) and uncovered, target_id
        first = [t for t in tests if t["selected"] and t.get("covers_first")]
        # a row is left uncovered only when its cheapest test did not fit in what the first
        # tests of the rows before it left: second tests and more examples come after
        left_after_firsts = budget - START_GENERATIONS - sum(least(t) for t in first)
        left_after_must = (
            budget
            - START_GENERATIONS
            - sum(least(t) for t in first if any(is_must(c) for c in t["covers_first"]))
        )
        for capability_id in uncovered:
            cheapest = min(least(t) for t in tests if capability_id in t["capabilities"])
            assert cheapest > left_after_firsts, (target_id, capability_id)
            if is_must(capability_id):
                assert cheapest > left_after_must, (target_id, capability_id)
        assert sum(t["estimated_generations"] for t in tests if t["selected"]) <= budget


def test_the_rows_the_issue_named_are_covered_at_forty(tmp_path: Path) -> None:
    """`--budget-generations 40` on fake-trtllm used to leave 17 of 41 rows uncovered, MUST
    rows among them, while four variants of one stop-reason test ran."""
    plan = dry_plan(tmp_path, fake=("trtllm",), budget_generations=40)
    tests = plan["tests"]
    assert {"tokens.token_input", "logprobs.selected_alignment"} <= covered(tests)
    stop = [t for t in tests if "test_matched_stop_is_reported_only_under_nvext" in t["nodeid"]]
    assert len(stop) == 4 and sum(t["selected"] for t in stop) <= 1
    # 59 rows now: the cheapest test of each costs 1-14 generations (three refits for the
    # version, served-policy and cache rows; each control effect read on both of a fake's
    # workers), so 40 cannot cover all.
    assert len(plan["targets"]["fake-trtllm"]["uncovered_capabilities"]) <= 17


def test_a_read_only_run_charges_nothing_for_its_mutating_tests(
    full_plan: dict[str, Any], tmp_path: Path
) -> None:
    assert not any(test.get("read_only") for test in full_plan["tests"])  # our fakes: mutable
    read_only = dry_plan(tmp_path / "ro", read_only=True, budget_generations=30)
    marked = [t for t in read_only["tests"] if t.get("read_only")]
    assert marked and all(t["estimated_generations"] == 0 and t["selected"] for t in marked)
    assert all(t["nodeid"].split("::")[0].endswith(MUTATING_MODULES) for t in marked)
    refresh = [t for t in read_only["tests"] if is_refresh(t)]
    assert refresh and all(t.get("read_only") for t in refresh)
    for target_id, entry in read_only["targets"].items():
        assert (
            entry["estimated_generations"]
            < full_plan["targets"][target_id]["estimated_generations"]
        )
        assert (
            entry["coverage"]["generations"]
            < full_plan["targets"][target_id]["coverage"]["generations"]
        )
    # a deployment reached by URL is read-only unless the user opts in
    url = {"frontend": "http://127.0.0.1:9", "backend": "vllm"}
    by_url = dry_plan(tmp_path / "url", **url)
    assert {t["nodeid"] for t in by_url["tests"] if t.get("read_only")} >= {
        t["nodeid"] for t in by_url["tests"] if is_refresh(t)
    }
    allowed = dry_plan(tmp_path / "allowed", allow_mutations=True, all_workers=True, **url)
    assert not any(t.get("read_only") for t in allowed["tests"])


@pytest.fixture
def run_profile() -> Any:
    """The run's profile (8 examples) for the duration of a test; the previous one after."""
    before = settings.get_current_profile_name()
    settings.register_profile("budget-plan-test", max_examples=8, database=None, deadline=None)
    settings.load_profile("budget-plan-test")
    yield
    settings.load_profile(before)


def default_examples() -> int:
    current = settings.default
    assert current is not None
    return current.max_examples


def test_a_property_test_runs_with_the_examples_its_plan_gives(run_profile: None) -> None:
    calls: list[int] = []

    @settings(max_examples=50, database=None)  # as if fixed by an earlier run in this process
    @given(st.integers())
    def property_test(number: int) -> None:
        calls.append(number)

    item = SimpleNamespace(obj=property_test)
    reduced = PlannedTest("n", "t", ("c",), "MUST", 3, examples=3)
    with _examples(item, reduced):  # type: ignore[arg-type]
        assert default_examples() == 3  # what a state machine reads when it runs
        property_test()
    assert len(calls) == 3
    assert default_examples() == 8
    calls.clear()
    with _examples(item, None):  # type: ignore[arg-type]
        property_test()
    assert len(calls) == 8  # the run's profile, not the settings fixed at import
    calls.clear()
    property_test()
    assert len(calls) == 50  # outside a run's call, the test's own settings are untouched


def test_a_dry_run_starts_no_zygote_for_the_fakes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dry run plans and starts nothing: not even the process the fakes would be forked from."""
    from rl_conformance.launchers import fake_zygote

    started: list[str] = []

    def refuse() -> Any:
        started.append("zygote")
        raise OSError("a dry run must not start the zygote")

    monkeypatch.setattr(fake_zygote.FakeZygote, "start", staticmethod(refuse))
    plan = dry_plan(tmp_path)
    assert plan["tests"] and started == []
