"""A control effect judged on every selected worker, not on one: a pause that reaches the first
of two workers only, an update one of them never applies, a cache one of them keeps, each fails.

A worker is observed through a generation pinned to it (nvext.backend_instance_id), which needs
its identity. Where no selected worker's identity is known, one unpinned generation is all there
is: with one selected worker it can only be that one's; with several it may be any of them, so a
pass says nothing of each, and the test is inconclusive for them, naming them. A worker of unknown
identity among known ones is never observed by a pinned generation: the same holds for it.
"""

from __future__ import annotations

import dataclasses

from ..checks.base import CheckResult
from ..model.verdict import Unobservable
from .admin import AdminWorker
from .admin_steps import Selection


def pins(selection: Selection) -> tuple[AdminWorker | None, ...]:
    """What each effect is read through: every selected worker whose identity is known and
    its own (its generations pinned to it), else one unpinned generation (None)."""
    unobservable = unobserved(selection)
    known = tuple(
        worker
        for worker in selection.workers
        if worker.instance_id is not None and worker not in unobservable
    )
    return known or (None,)


def unobserved(selection: Selection) -> tuple[AdminWorker, ...]:
    """The selected workers no generation of `pins` is known to reach: those of unknown
    identity, and those listed with an instance id an earlier selected worker already has (a
    generation pinned to that id reaches one of them, which one is not known)."""
    if len(selection.workers) == 1:
        return ()
    seen: set[object] = set()
    found = []
    for worker in selection.workers:
        if worker.instance_id is None or worker.instance_id in seen:
            found.append(worker)
        seen.add(worker.instance_id)
    return tuple(found)


def on_worker(result: CheckResult, worker: AdminWorker | None) -> CheckResult:
    """`result` with each violation naming the worker it was observed on."""
    if result.passed or worker is None:
        return result
    return dataclasses.replace(
        result,
        violations=tuple(
            dataclasses.replace(violation, message=f"on {worker.label}: {violation.message}")
            for violation in result.violations
        ),
    )


def require_observed(selection: Selection, what: str) -> None:
    """Inconclusive, naming them, when a selected worker was not observed on its own: what was
    judged passed, and says nothing of them."""
    missing = unobserved(selection)
    if missing:
        judged = [worker.label for worker in selection.workers if worker not in missing]
        raise Unobservable(
            f"{what} on {', '.join(worker.label for worker in missing)}: no generation is "
            "known to be theirs (their system servers' /metrics name no worker_id, or another "
            "selected worker is listed with the same instance id)"
            + (f"; judged on {', '.join(judged)}" if judged else "; judged on whichever served")
        )


def label(worker: AdminWorker | None) -> str:
    return worker.label if worker is not None else "the worker that served it"
