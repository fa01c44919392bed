"""Administrative steps as the suites take them: one worker, each call checked by status AND
body, pauses that always end in a resume. Shared by the administration and refresh suites."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from .admin import AdminClient, AdminWorker
from .checks import admin as admin_checks
from .refresh import AdminFamily, family_for, new_version
from .target import Target
from .verdict import FeatureAbsent, Verdict


def one_worker(target: Target, workers: list[AdminWorker]) -> tuple[AdminWorker, AdminFamily]:
    """The first administrable worker and the administration family it speaks."""
    if target.backend == "trtllm" or not workers:
        raise FeatureAbsent("the deployment exposes no worker administration (no system_url)")
    worker = workers[0]
    family = family_for(target, worker)
    if family is None:
        raise FeatureAbsent(f"{worker.label} speaks no known administration family")
    return worker, family


def succeed(
    verdict: Verdict,
    admin: AdminClient,
    worker: AdminWorker,
    family: AdminFamily,
    route: str,
    body: Any = None,
) -> Any:
    """One administrative call that must succeed; returns the parsed reply."""
    exchange = admin.call(worker, route, body)
    try:
        parsed = exchange.json()
    except ValueError:
        parsed = None
    verdict.check(
        admin_checks.success_semantics(family.name, exchange.status, parsed, route), exchange
    )
    return parsed


@contextlib.contextmanager
def paused(
    verdict: Verdict,
    admin: AdminClient,
    worker: AdminWorker,
    family: AdminFamily,
    mode: str | None = None,
) -> Iterator[None]:
    """Pause (checked), run the body, and always resume: a failing step never leaves a worker
    paused for the tests after it."""
    body = family.pause_body if mode is None else {**family.pause_body, "mode": mode}
    try:
        succeed(verdict, admin, worker, family, family.pause, body)
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            admin.call(worker, family.resume, {})
        raise
    succeed(verdict, admin, worker, family, family.resume, {})


def apply_update(
    verdict: Verdict,
    admin: AdminClient,
    worker: AdminWorker,
    family: AdminFamily,
    model_path: Callable[[str], str | None],
) -> str:
    """Pause, apply a new named weight version, resume; returns the version."""
    version = new_version()
    with paused(verdict, admin, worker, family):
        succeed(
            verdict,
            admin,
            worker,
            family,
            family.update,
            family.update_body(version, model_path(version)),
        )
    return version
