"""Which tests run, against which targets, in which order."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ..contract.kinds import Capability
from ..model import capabilities as capability_registry

TARGET_FIXTURE = "rl_target"
UNTARGETED_GROUP = "untargeted"
ENDS_WORKER = "may_end_worker"
"""The mark of a probe that may end the worker it is sent to, with the reason
(`@pytest.mark.may_end_worker("...")`): it runs after every other test of its target
(`crash_probes`)."""


def capabilities_of(item: pytest.Item) -> tuple[str, ...]:
    """The ids of the rows a test certifies: its `@capability(contract.<area>.<ROW>)` marks
    name the row object, so a misspelt row is an error where the suite is imported."""
    found = []
    for mark in item.iter_markers("capability"):
        if not mark.args:
            continue
        row = mark.args[0]
        if not isinstance(row, Capability):
            raise pytest.UsageError(
                f"{item.nodeid}: @capability expects a row of rl_conformance.contract "
                f"(e.g. contract.tokens.COMPLETION_IDS), observed {row!r}"
            )
        found.append(row.id)
    return tuple(found)


def target_of(item: pytest.Item) -> str:
    return str(getattr(getattr(item, "callspec", None), "params", {}).get(TARGET_FIXTURE, ""))


def ends_worker_reason(item: pytest.Item) -> str | None:
    """Why the test may end the worker it is sent to (its `may_end_worker` mark), None when it
    may not; a mark without a reason is refused at collection."""
    mark = item.get_closest_marker(ENDS_WORKER)
    if mark is None:
        return None
    reason = mark.args[0] if mark.args else mark.kwargs.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.{ENDS_WORKER} needs the reason the probe may end a worker"
        )
    return reason.strip()


def run_rank(item: pytest.Item) -> int:
    """Where a test runs among its target's: read-only first (0), then mutating (1), then the
    probes that may end the worker (2), so that a worker one of them ends blanks no other row."""
    if ends_worker_reason(item) is not None:
        return 2
    return 1 if item.get_closest_marker("mutating") is not None else 0


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
    mutating ones after every read-only one, so state never leaks into unrelated capabilities,
    and the probes that may end a worker after every other one (`run_rank`); a target can be
    stopped as soon as its last test ran. The sort is stable: within a rank, collection order.
    A parallel run keeps this order within each of its groups (`balance`, `distribution`)."""
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
    items.sort(key=lambda item: (order.get(target_of(item), -1), run_rank(item)))
