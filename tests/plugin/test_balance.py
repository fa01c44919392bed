"""How a parallel run divides tests between deployments (`plugin.balance`): a target cheap to
start again is split by whole modules (a module longer than a group's share by its tests) into
groups of about equal measured seconds, each group in collection order and the longest first; a
user's deployment stays one group."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rl_conformance.plugin import balance


def item(target: str, module: str, name: str) -> Any:
    return SimpleNamespace(
        callspec=SimpleNamespace(params={"rl_target": target}),
        path=Path("suites") / module,
        name=name,
        nodeid=f"{module}::test_{name}[{target}]",
    )


ITEMS = [
    item("fake-vllm", "test_discovery.py", "a"),
    item("fake-vllm", "test_pause_modes.py", "b"),
    item("external-vllm", "test_pause_modes.py", "c"),
    item("fake-vllm", "test_streaming.py", "d"),
    item("fake-vllm", "test_refresh_streams_in_flight.py", "e"),
    item("external-vllm", "test_discovery.py", "f"),
    item("fake-vllm", "test_pause_modes.py", "g"),
]
UNIT = balance.GROUP_S / 4
"""The tables' seconds are in quarters of a group, so that the splits below hold whatever
`GROUP_S` is (4 units: one group)."""


def scaled(table: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {target: {k: v * UNIT for k, v in tests.items()} for target, tests in table.items()}


TABLE = scaled(
    {
        "fake-vllm": {
            "test_discovery.py::test_a": 1.0,
            "test_pause_modes.py::test_b": 2.5,
            "test_pause_modes.py::test_g": 2.0,
            "test_streaming.py::test_d": 1.5,
            "test_refresh_streams_in_flight.py::test_e": 2.0,
        },
        "external-vllm": {"test_pause_modes.py::test_c": 30.0, "test_discovery.py::test_f": 1.0},
    }
)


def names(groups: list[list[Any]]) -> list[list[str]]:
    return [[found.name for found in group] for group in groups]


def test_a_cheap_target_is_split_by_measured_seconds_and_a_users_deployment_is_not() -> None:
    groups = balance.balanced_groups(ITEMS, {"fake-vllm"}, TABLE)
    # fake-vllm: 9 units measured -> two groups: pause modes (4.5) against the rest (4.5);
    # the external target (31) is one group, the longest, so it starts first.
    assert names(groups) == [["c", "f"], ["b", "g"], ["a", "d", "e"]]


def test_without_a_split_every_target_is_one_group_in_collection_order() -> None:
    assert names(balance.balanced_groups(ITEMS, set(), TABLE)) == [
        ["c", "f"],
        ["a", "b", "d", "e", "g"],
    ]


def test_an_unmeasured_test_is_estimated_and_never_lost() -> None:
    table = scaled({"fake-vllm": {"test_pause_modes.py::test_b": 8.0}})
    groups = balance.balanced_groups(ITEMS, {"fake-vllm"}, table)
    assert sorted(found.name for group in groups for found in group) == list("abcdefg")
    # fake-vllm: b's 8 units and `UNKNOWN_TEST_S` for each of a, d, e and g: two parts. The
    # pause-modes module (b and g) is longer than a part: its tests go apart, b alone.
    assert names(groups) == [["b"], ["a", "d", "e", "g"], ["c", "f"]]


def test_a_module_longer_than_a_parts_share_is_divided_by_its_tests() -> None:
    table = scaled(
        {
            "fake-vllm": {
                "test_pause_modes.py::test_b": 3.0,
                "test_pause_modes.py::test_g": 2.5,
                "test_discovery.py::test_a": 1.5,
                "test_streaming.py::test_d": 0.5,
                "test_refresh_streams_in_flight.py::test_e": 0.5,
            }
        }
    )
    groups = balance.balanced_groups(ITEMS, {"fake-vllm"}, table)
    # 8 units in two parts of 4: whole, pause modes (5.5) would make one part 5.5 long;
    # divided, b (3) and g (2.5) each lead a part and the whole modules fill them.
    assert names(groups) == [["b", "d", "e"], ["a", "g"], ["c", "f"]]


def test_only_the_selected_tests_of_a_module_count() -> None:
    """A run of one test of a long module (`--capability`) is not split as if it ran them all."""
    table = {"fake-vllm": {"test_pause_modes.py::test_b": 0.1, "test_pause_modes.py::test_x": 50}}
    chosen = [found for found in ITEMS if found.name in ("a", "b")]
    assert names(balance.balanced_groups(chosen, {"fake-vllm"}, table)) == [["a", "b"]]


def test_groups_are_sized_by_seconds_within_bounds() -> None:
    assert balance.parts_for(0.0) == 1
    assert balance.parts_for(balance.GROUP_S * 2) == 2
    assert balance.parts_for(balance.GROUP_S * 100) == balance.MOST_PARTS
    sets = balance.split_modules({"a": 5.0, "b": 4.0, "c": 3.0, "d": 2.0}, 2)
    assert sorted(map(sorted, sets)) == [["a", "d"], ["b", "c"]]
    assert balance.split_modules({"a": 1.0}, 3) == [{"a"}]


def test_the_packaged_table_holds_the_default_fakes() -> None:
    table = balance.measured_seconds()
    assert set(table) == {"fake-vllm", "fake-sglang", "fake-trtllm", "fake-vllm-sidecar"}
    assert all(value >= 0 for modules in table.values() for value in modules.values())
    assert balance.planned_groups(list(table), set()) == len(table)
    assert balance.planned_groups(["fake-unknown"], {"fake-unknown"}) == balance.MOST_PARTS
