"""The probes that may end the worker they are sent to: an invalid pause mode, a second pause, a
memory release while requests run, an update while a pause holds requests in place (real SGLang
0.5.21 exits on the first, the third and the last: fixtures/KNOWN_DIFFERENCES.md).

A suite test declares it once, with the reason, as `@pytest.mark.may_end_worker("...")`. It
runs after every other test of its target (`collection.run_rank`), so a worker it ends blanks no
other row; the run names each such probe, and why, before its first test; `--skip-crash-probes`
leaves them out, each `skipped` naming the flag. Registered by `ConformanceRun` as a plugin of its
own; the run's state is on `config.stash` (`state.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..reports import console
from .collection import capabilities_of, ends_worker_reason, target_of
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


def probes_in(items: Sequence[pytest.Item], targets: set[str] | None = None) -> list[CrashProbe]:
    """The distinct probes among `items` (of `targets`, when given) that may end a worker, in
    the order they run."""
    found: dict[tuple[str, str], CrashProbe] = {}
    for item in items:
        reason = ends_worker_reason(item)
        if reason is None or (targets is not None and target_of(item) not in targets):
            continue
        test = getattr(item, "originalname", item.name)
        capability = next(iter(capabilities_of(item)), "")
        found.setdefault((capability, test), CrashProbe(capability, test, reason))
    return list(found.values())


def announcement(config: pytest.Config, items: Sequence[pytest.Item], width: int) -> list[str]:
    """What the console says before the first test: the probes that may end a worker on the
    targets the run may change (on a read-only target they send no mutating call), and that
    they run last there; or, with the flag, that they are left out."""
    state = state_of(config)
    left_out = state.config.skip_crash_probes
    read_only = state.run.read_only_targets()
    mutable = {target_of(item) for item in items} - read_only
    probes = probes_in(items, None if left_out else mutable)
    targets = sorted({target_of(item) for item in items if ends_worker_reason(item)} & mutable)
    return console.crash_probe_lines(
        [(probe.capability, probe.reason) for probe in probes],
        targets,
        flag=FLAG,
        left_out=left_out,
        width=width,
    )


def pytest_report_collectionfinish(
    config: pytest.Config, start_path: Path, items: Sequence[pytest.Item]
) -> list[str]:
    reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
    width = reporter._tw.fullwidth if reporter is not None else 100
    return announcement(config, items, width)
