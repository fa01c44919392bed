"""The probes that may end the worker they are sent to: an invalid pause mode, a second pause, a
memory release while requests run, an update while a pause holds requests in place (real SGLang
0.5.21 exits on the first, the third and the last: fixtures/KNOWN_DIFFERENCES.md).

A suite test declares it once, with the reason, as `@pytest.mark.may_end_worker("...")`. It
runs after every other test of its target (`collection.run_rank`), so a worker it ends blanks no
other row; the run names each such probe, and why, before its first test; `--skip-crash-probes`
leaves them out, each `skipped` naming the flag. Registered by `ConformanceRun` as a plugin of its
own; the run's state is on `config.stash` (`state.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..reports import console
from .collection import ENDS_WORKER, capabilities_of, ends_worker_reason, target_of
from .distribution import target_in_nodeid
from .state import state_of

FLAG = "--skip-crash-probes"


@dataclass(frozen=True)
class CrashProbe:
    """One suite test that may end a worker (all its parameters and targets)."""

    capability: str
    test: str
    reason: str


def left_out_reason(reason: str) -> str:
    """A left-out probe's skip reason: what it may do, and the flag that left it out (in the
    parenthesised advice the console groups skipped cells by)."""
    return f"left out by {FLAG}: it may end the worker, {reason} (run without {FLAG} to judge it)"


def leave_out(items: Sequence[pytest.Item]) -> None:
    """Skip every probe that may end a worker, naming the flag."""
    for item in items:
        reason = ends_worker_reason(item)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=left_out_reason(reason)))


def probe_of(item: pytest.Item) -> CrashProbe | None:
    reason = ends_worker_reason(item)
    if reason is None:
        return None
    test = getattr(item, "originalname", item.name)
    return CrashProbe(next(iter(capabilities_of(item)), ""), test, reason)


def declared_probe(root: Path, nodeid: str) -> CrashProbe | None:
    """The probe a test id names, read from its function's marks: a parallel run's controller
    under pytest-xdist collects nothing itself and learns only the ids its workers collected."""
    from _pytest.mark.structures import get_unpacked_marks
    from _pytest.pathlib import ImportMode, import_path

    path, _, rest = nodeid.partition("::")
    name = rest.split("[", 1)[0]
    try:
        module = import_path(
            root / path, mode=ImportMode.importlib, root=root, consider_namespace_packages=False
        )
        test = getattr(module, name, None)
        marks = [*(get_unpacked_marks(test) if test else []), *get_unpacked_marks(module)]
    except Exception:  # the workers run and report what the controller cannot read
        return None
    found = {mark.name: mark for mark in reversed(marks)}  # the closest mark of each name
    ending = found.get(ENDS_WORKER)
    capability = found.get("capability")
    if ending is None or not ending.args:
        return None
    row = capability.args[0] if capability and capability.args else None
    return CrashProbe(getattr(row, "id", ""), name, str(ending.args[0]))


def announcement(
    config: pytest.Config, found: Iterable[tuple[str, CrashProbe | None]], width: int
) -> list[str]:
    """What the console says before the first test, from each test's target and probe (None:
    not one): the probes that may end a worker on the targets the run may change (on a read-only
    target they send no mutating call), and that they run last there; or, with the flag, that
    they are left out."""
    state = state_of(config)
    left_out = state.config.skip_crash_probes
    read_only = state.run.read_only_targets()
    chosen = [
        (target, probe)
        for target, probe in found
        if probe is not None and (left_out or target not in read_only)
    ]
    return console.crash_probe_lines(
        [(probe.capability, probe.reason) for probe in dict.fromkeys(p for _, p in chosen)],
        sorted({target for target, _ in chosen}),
        flag=FLAG,
        left_out=left_out,
        width=width,
    )


def announcement_of_ids(config: pytest.Config, ids: Sequence[str], width: int) -> list[str]:
    """The announcement of a controller that holds test ids only (pytest-xdist)."""
    targets = state_of(config).pool.ids
    probes: dict[str, CrashProbe | None] = {}
    for nodeid in ids:
        key = nodeid.split("[", 1)[0]
        if key not in probes:
            probes[key] = declared_probe(config.rootpath, nodeid)
    found = [(target_in_nodeid(n, targets), probes[n.split("[", 1)[0]]) for n in ids]
    return announcement(config, found, width)


def console_width(config: pytest.Config) -> int:
    reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
    return reporter._tw.fullwidth if reporter is not None else 100


ANNOUNCED: pytest.StashKey[list[str]] = pytest.StashKey()


def announce(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Build the announcement of the collected tests (a dry run then deselects them all, and
    still says which would end a worker); it is printed once collection finishes."""
    found = [(target_of(item), probe_of(item)) for item in items]
    config.stash[ANNOUNCED] = announcement(config, found, console_width(config))


def pytest_report_collectionfinish(
    config: pytest.Config, start_path: Path, items: Sequence[pytest.Item]
) -> list[str]:
    return config.stash.get(ANNOUNCED, [])
