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
    """What each effect is read through: every selected worker whose identity is known (its
    generations pinned to it), else one unpinned generation (None)."""
    known = tuple(worker for worker in selection.workers if worker.instance_id is not None)
    return known or (None,)


def unobserved(selection: Selection) -> tuple[AdminWorker, ...]:
    """The selected workers no generation of `pins` is known to reach."""
    if len(selection.workers) == 1:
        return ()
    return tuple(worker for worker in selection.workers if worker.instance_id is None)


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
            f"{what} on {', '.join(worker.label for worker in missing)}: generations cannot be "
            "pinned to them (their system servers' /metrics name no worker_id), so no "
            "generation is known to be theirs"
            + (f"; judged on {', '.join(judged)}" if judged else "; judged on whichever served")
        )


def label(worker: AdminWorker | None) -> str:
    return worker.label if worker is not None else "the worker that served it"
