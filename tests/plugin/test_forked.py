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
