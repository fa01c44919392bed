"""Which tests run, against which targets, in which order."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ..model import capabilities as capability_registry

TARGET_FIXTURE = "rl_target"
UNTARGETED_GROUP = "untargeted"


def capabilities_of(item: pytest.Item) -> tuple[str, ...]:
    return tuple(mark.args[0] for mark in item.iter_markers("capability") if mark.args)


def target_of(item: pytest.Item) -> str:
    return str(getattr(getattr(item, "callspec", None), "params", {}).get(TARGET_FIXTURE, ""))


def parametrize_targets(metafunc: pytest.Metafunc, target_ids: Sequence[str]) -> None:
    """Every test that takes `rl_target` runs once per target; session scope, so a target is
    started once and shared by its tests."""
    if TARGET_FIXTURE in metafunc.fixturenames:
        ids = list(target_ids)
        metafunc.parametrize(TARGET_FIXTURE, ids, ids=ids, indirect=True, scope="session")


def select_and_order(
    config: pytest.Config,
    items: list[pytest.Item],
    wanted: set[str],
    target_ids: Sequence[str],
) -> None:
    """Keep the tests of the wanted capabilities; run each target's tests together, the
    mutating ones after every read-only one, so state never leaks into unrelated capabilities
    and a target can be stopped as soon as its last test ran."""
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marked = capabilities_of(item)
        for capability_id in marked:
            if capability_id not in capability_registry.BY_ID:
                raise pytest.UsageError(f"{item.nodeid}: unknown capability {capability_id!r}")
        (keep if not marked or wanted & set(marked) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    order = {target_id: index for index, target_id in enumerate(target_ids)}
    items.sort(
        key=lambda item: (
            order.get(target_of(item), -1),
            item.get_closest_marker("mutating") is not None,
        )
    )
