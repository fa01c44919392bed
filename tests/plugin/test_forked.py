"""The forked parallel run's plumbing: every child's messages reach the parent in the order the
child sent them, at most `jobs` children run at once, and a child that dies is reported."""

from __future__ import annotations

import os
from typing import Any

import pytest

from rl_conformance.plugin import forked

pytestmark = pytest.mark.skipif(not forked.available(), reason="the platform does not fork")


def test_children_messages_arrive_and_a_crash_is_reported() -> None:
    received: list[dict[str, Any]] = []

    def run_group(items: list[Any], send: Any) -> None:
        if items == ["boom"]:
            raise RuntimeError("a child that fails")
        for item in items:
            send({"kind": "item", "value": item, "pid": os.getpid()})

    groups: list[list[Any]] = [["a1", "a2", "a3"], ["b1"], ["boom"], ["c1", "c2"]]
    forked.run_children(groups, 2, run_group, received.append)  # type: ignore[arg-type]
    values = [message["value"] for message in received if message["kind"] == "item"]
    assert sorted(values) == ["a1", "a2", "a3", "b1", "c1", "c2"]
    assert [v for v in values if v.startswith("a")] == ["a1", "a2", "a3"]
    assert {message["kind"] for message in received} == {"item", "crashed"}
    assert [m["code"] for m in received if m["kind"] == "crashed"] == [1]
    assert len({m["pid"] for m in received if m["kind"] == "item"}) == 3
    assert os.getpid() not in {m["pid"] for m in received if m["kind"] == "item"}


def test_a_target_cheap_to_start_twice_gives_its_waiting_suites_a_child_of_their_own() -> None:
    """The suites that mostly wait (holds, deadlines) of a fake run beside its other tests, each
    group in collection order, the waiting groups first; a target not cheap to start (a user's
    deployment) keeps all its tests in one child."""
    from pathlib import Path
    from types import SimpleNamespace

    def item(target: str, module: str, name: str) -> SimpleNamespace:
        return SimpleNamespace(
            callspec=SimpleNamespace(params={"rl_target": target}),
            path=Path("suites") / module,
            name=name,
        )

    items = [
        item("fake-vllm", "test_discovery.py", "a"),
        item("fake-vllm", "test_pause_modes.py", "b"),
        item("external-vllm", "test_pause_modes.py", "c"),
        item("fake-vllm", "test_streaming.py", "d"),
        item("fake-vllm", "test_refresh_streams_in_flight.py", "e"),
        item("external-vllm", "test_discovery.py", "f"),
    ]
    groups = forked.groups_by_target(items, {"fake-vllm"})  # type: ignore[arg-type]
    assert [[found.name for found in group] for group in groups] == [
        ["b", "e"],
        ["a", "d"],
        ["c", "f"],
    ]
    assert len(forked.groups_by_target(items)) == 2  # type: ignore[arg-type]
