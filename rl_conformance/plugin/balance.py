"""How a parallel run divides a target's tests between deployments: a target cheap to start
again (our fakes) is tested as several deployments of its kind at once, each running whole suite
modules, balanced by the seconds each test took on that target when last measured
(`suite_seconds.json`, written by `rl-conformance generation-costs`); a module longer than a
deployment's share is divided by its tests (its module fixtures then run on each deployment
that has some of them), else it alone would set the run's length. A user's deployment is one
group: it is started once.

The suites' time is mostly waiting out verdict windows (a hold watched, a stream run to its
length after a resume, a listener's probe deadline), so more deployments shorten the run until
starting them costs more than it saves: a group is sized at about `GROUP_S` of measured tests.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Protocol, TypeVar

from ..client.budget import cost_key
from .collection import target_of

SECONDS_RESOURCE = "suite_seconds.json"
GROUP_S = 3.0
"""Measured test seconds per deployment: on a 2-core machine the default run is fastest with
groups of about 3 s (11 groups: median 5.88 s against 6.38 s with 4 s, n=9 in one run of
`benchmarks/default_run.py --compare`; 2.5 s took as long with more CPU, 2 s 10-14% longer).
A deployment costs its start (a fork of the fakes' zygote) and a child's preflight; below this
size that outweighs the wait it takes off the longest group. Groups were 4 s while a stream
cost twice the CPU it costs now: the run was then bound by CPU alone."""
MOST_PARTS = 4
UNKNOWN_TEST_S = 0.05
"""A test the table does not hold (a new test, an unmeasured target)."""


class Item(Protocol):
    """What the balance reads of a collected test: its id, its module's path (and its target,
    through `collection.target_of`)."""

    @property
    def nodeid(self) -> str: ...

    @property
    def path(self) -> object: ...


ItemT = TypeVar("ItemT", bound=Item)


@cache
def measured_seconds() -> dict[str, dict[str, float]]:
    """Target id -> test (`budget.cost_key`: its id without the target) -> seconds, as measured
    on our fakes; {} when unreadable."""
    try:
        text = resources.files("rl_conformance").joinpath(SECONDS_RESOURCE).read_text("utf-8")
        document = json.loads(text)
    except (OSError, ValueError):
        return {}
    targets = document.get("targets") if isinstance(document, dict) else None
    return targets if isinstance(targets, dict) else {}


def module_of(item: Item) -> str:
    return str(getattr(item.path, "name", item.path))


def test_seconds(
    target_id: str, items: Sequence[Item], table: Mapping[str, Mapping[str, float]]
) -> list[float]:
    """Each of `items`' (all of one target) measured seconds, else `UNKNOWN_TEST_S`."""
    known = table.get(target_id, {})
    return [float(known.get(cost_key(item.nodeid, target_id), UNKNOWN_TEST_S)) for item in items]


def estimate(
    target_id: str, items: Sequence[Item], table: Mapping[str, Mapping[str, float]]
) -> dict[str, float]:
    """Seconds per module of `items` (all of one target, as selected)."""
    seconds: dict[str, float] = {}
    for item, took in zip(items, test_seconds(target_id, items, table), strict=True):
        seconds[module_of(item)] = seconds.get(module_of(item), 0.0) + took
    return seconds


def units_of(items: Sequence[Item], seconds: Sequence[float], share: float) -> list[str]:
    """What a group takes whole, for each of `items`: its module, or the test itself where its
    module is longer than `share`."""
    per_module: dict[str, float] = {}
    for item, took in zip(items, seconds, strict=True):
        per_module[module_of(item)] = per_module.get(module_of(item), 0.0) + took
    return [
        item.nodeid if per_module[module_of(item)] > share else module_of(item) for item in items
    ]


def parts_for(seconds: float) -> int:
    return max(1, min(MOST_PARTS, round(seconds / GROUP_S)))


def split_modules(seconds: Mapping[str, float], parts: int) -> list[set[str]]:
    """The units (modules, or tests) in `parts` sets of about equal seconds: the longest first,
    each to the set with the fewest seconds so far (ties to the earlier set); empty sets are
    dropped."""
    loads = [0.0] * parts
    sets: list[set[str]] = [set() for _ in range(parts)]
    for module in sorted(seconds, key=lambda name: (-seconds[name], name)):
        lightest = loads.index(min(loads))
        loads[lightest] += seconds[module]
        sets[lightest].add(module)
    return [found for found in sets if found]


def balanced_groups(
    items: Sequence[ItemT],
    splittable: Collection[str] = (),
    table: Mapping[str, Mapping[str, float]] | None = None,
) -> list[list[ItemT]]:
    """The groups of a parallel run, each in collection order, the longest (by estimate) first,
    so that with fewer processes than groups the short ones wait: one per target, and for a
    target in `splittable`, `parts_for` its estimated seconds, by whole modules where a module
    fits a part's share (`units_of`)."""
    table = measured_seconds() if table is None else table
    by_target: dict[str, list[ItemT]] = {}
    for item in items:
        by_target.setdefault(target_of(item), []).append(item)  # type: ignore[arg-type]
    weighed: list[tuple[float, list[ItemT]]] = []
    for target_id, its in by_target.items():
        took = test_seconds(target_id, its, table)
        parts = parts_for(sum(took)) if target_id in splittable else 1
        units = units_of(its, took, sum(took) / parts) if parts > 1 else [module_of(i) for i in its]
        seconds: dict[str, float] = {}
        for unit, each in zip(units, took, strict=True):
            seconds[unit] = seconds.get(unit, 0.0) + each
        for chosen in split_modules(seconds, parts):
            group = [item for item, unit in zip(its, units, strict=True) if unit in chosen]
            weighed.append((sum(seconds[unit] for unit in chosen), group))
    weighed.sort(key=lambda pair: -pair[0])
    return [group for _, group in weighed]


def planned_groups(target_ids: Sequence[str], splittable: Collection[str]) -> int:
    """How many groups `balanced_groups` gives at most for these targets, from the table alone
    (before collection; `MOST_PARTS` for a splittable target it does not hold): what sizes a
    parallel run's processes."""
    table = measured_seconds()

    def most(target_id: str) -> int:
        if target_id not in splittable:
            return 1
        if target_id not in table:
            return MOST_PARTS
        return parts_for(sum(table[target_id].values()))

    return sum(most(target_id) for target_id in target_ids)
