"""A control effect judged on each worker it is read on, not on one: a pause that reaches the
first of two workers only, an update one of them never applies, a cache one of them keeps, each
fails. What the spec asks of every worker ("Verify every worker and run post-update generation
before reopening the fleet": the version each reports, what each generates after an update) is
read on every selected worker (`every=True`); any other effect on the run's sample of them
(`Selection.judged`, `model.worker_sample`), named on the test's record and its cell's reason,
so a pass never claims more workers than it observed. The workers' generations of one step go
out at once (`at_once`), so judging many costs about the time of judging one.

A worker is observed through a generation pinned to it (nvext.backend_instance_id), which needs
its identity. Where no selected worker's identity is known, one unpinned generation is all there
is: with one selected worker it can only be that one's; with several it may be any of them, so a
pass says nothing of each, and the test is inconclusive for them, naming them. A worker of unknown
identity among known ones is never observed by a pinned generation: the same holds for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ..checks.base import CheckResult
from ..model.verdict import Unobservable, Verdict
from . import admin
from .admin import AdminWorker
from .admin_steps import Selection

Item = TypeVar("Item")
Result = TypeVar("Result")


def considered(selection: Selection, every: bool = False) -> tuple[AdminWorker, ...]:
    """The selected workers an effect is read on: every one, or the run's sample."""
    return selection.workers if every else selection.judged


def pins(selection: Selection, every: bool = False) -> tuple[AdminWorker | None, ...]:
    """What each effect is read through: every considered worker (`considered`) whose identity
    is known and its own (its generations pinned to it), else one unpinned generation (None)."""
    unobservable = unobserved(selection, every)
    known = tuple(
        worker
        for worker in considered(selection, every)
        if worker.instance_id is not None and worker not in unobservable
    )
    return known or (None,)


def unobserved(selection: Selection, every: bool = False) -> tuple[AdminWorker, ...]:
    """The considered workers no generation of `pins` is known to reach: those of unknown
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
    reading = considered(selection, every)
    return tuple(worker for worker in found if worker in reading)


def at_once(work: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
    """`work` on each item at once (at most `admin.FANOUT` in flight, the administration's
    bound), the results in the items' order: the pinned generations of one step cost the time of
    one, not of one per worker. The client is synchronous per thread; a check that raises in one
    raises here, the first in the items' order."""
    if len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(admin.FANOUT, len(items))) as pool:
        return list(pool.map(work, items))


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


def require_observed(
    selection: Selection,
    what: str,
    verdict: Verdict | None = None,
    every: bool = False,
    every_for: str | None = None,
) -> None:
    """Inconclusive, naming them, when a considered worker was not observed on its own: what was
    judged passed, and says nothing of them. A sample is measured on `verdict`
    (`judged_workers`, with `every_for`: what the test judged on every selected worker), so the
    record and the cell's reason name the workers judged."""
    if verdict is not None and not every and selection.sampled:
        verdict.measure(
            judged_workers=selection.sample.judged(
                [worker.label for worker in selection.judged], len(selection.workers), every_for
            )
        )
    missing = unobserved(selection, every)
    if missing:
        reading = considered(selection, every)
        judged = [worker.label for worker in reading if worker not in missing]
        raise Unobservable(
            f"{what} on {', '.join(worker.label for worker in missing)}: no generation is "
            "known to be theirs (their system servers' /metrics name no worker_id, or another "
            "selected worker is listed with the same instance id)"
            + (f"; judged on {', '.join(judged)}" if judged else "; judged on whichever served")
        )


def label(worker: AdminWorker | None) -> str:
    return worker.label if worker is not None else "the worker that served it"
