"""`kill-matrix --jobs N`: the clean fakes in one shard, the faults split over the others, and
the shards' matrices merged into one."""

from __future__ import annotations

from typing import Any

import pytest

from fake_backends import FAULT_NAMES
from rl_conformance.cli.kill_matrix import _shard
from rl_conformance.errors import ConfigurationError
from rl_conformance.launchers.plan import fault_matrix_pool
from rl_conformance.model.killmatrix import merge_matrix_documents, split_target_id


def faults_of(shard: tuple[int, int] | None) -> set[str]:
    pool = fault_matrix_pool(1, shard)
    return {parsed[1] for t in pool.planned_targets() if (parsed := split_target_id(t.id))}


def test_shards_cover_every_fault_once_and_the_clean_fakes_run_once_alone() -> None:
    shards = [faults_of((index, 4)) for index in range(4)]
    assert shards[0] == set()
    assert set().union(*shards) == set(FAULT_NAMES) == faults_of(None)
    assert sum(len(s) for s in shards) == len(FAULT_NAMES)
    clean = {t.id for t in fault_matrix_pool(1, (0, 4)).planned_targets()}
    everything = fault_matrix_pool(1).planned_targets()
    assert clean == {t.id for t in everything if not split_target_id(t.id)}
    for index in range(1, 4):
        targets = {t.id for t in fault_matrix_pool(1, (index, 4)).planned_targets()}
        assert all(split_target_id(t) for t in targets)
        assert {f"fake-{split_target_id(t)[0]}" for t in targets} <= clean


def test_one_shard_holds_everything() -> None:
    assert {t.id for t in fault_matrix_pool(1, (0, 1)).planned_targets()} == {
        t.id for t in fault_matrix_pool(1).planned_targets()
    }


@pytest.mark.parametrize("value", ["1", "a/2", "2/2", "-1/2"])
def test_a_bad_shard_is_named(value: str) -> None:
    with pytest.raises(ConfigurationError, match="--shard"):
        _shard(value)


def document(targets: list[str], cells: dict[str, str], complete: bool = True) -> dict[str, Any]:
    return {
        "complete": complete,
        "started_at": "2026-12-03T07:00:00Z",
        "finished_at": "2026-12-03T07:01:00Z",
        "duration_s": 60.0,
        "summary": {"pass": 0, "fail": 0, "error": 0},
        "exit_status": 0,
        "targets": [{"id": t} for t in targets],
        "capabilities": [
            {"id": "cap", "cells": {t: {"outcome": outcome} for t, outcome in cells.items()}}
        ],
    }


def test_merging_keeps_every_target_once_and_every_cell() -> None:
    merged = merge_matrix_documents(
        [
            document(["fake-vllm", "fake-vllm~a"], {"fake-vllm": "pass", "fake-vllm~a": "fail"}),
            document(["fake-vllm", "fake-vllm~b"], {"fake-vllm": "pass", "fake-vllm~b": "pass"}),
        ]
    )
    assert [t["id"] for t in merged["targets"]] == ["fake-vllm", "fake-vllm~a", "fake-vllm~b"]
    assert set(merged["capabilities"][0]["cells"]) == {"fake-vllm", "fake-vllm~a", "fake-vllm~b"}
    assert merged["summary"] == {"pass": 2, "fail": 1, "error": 0}
    assert merged["exit_status"] == 1 and merged["complete"]


def test_an_incomplete_shard_makes_the_merge_incomplete() -> None:
    merged = merge_matrix_documents(
        [document(["x"], {"x": "pass"}), document(["y"], {"y": "pass"}, complete=False)]
    )
    assert not merged["complete"] and merged["exit_status"] == 1
    assert merged["incomplete_reason"] == "interrupted"


def test_each_slow_fault_has_a_shard_of_its_own_and_starts_first() -> None:
    from fake_backends import FAULTS
    from rl_conformance.launchers.plan import fault_shard_count, fault_shards

    slow = sorted(name for name, fault in FAULTS.items() if fault.slow)
    assert slow, "no fault is marked slow"
    shards = fault_shards(fault_shard_count())
    assert [shard for shard in shards[: len(slow)]] == [(name,) for name in slow]
    assert sorted(name for shard in shards for name in shard) == sorted(FAULTS)
