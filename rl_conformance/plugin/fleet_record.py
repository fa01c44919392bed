"""Before the first mutating test of a deployment the run did not start, each worker the run
may change is read as it is found (`control/fleet_state.py`): what the run's end puts back and
verifies (`plugin/restore.py`). Read after the test's fixtures were set up and before its body
runs: no request of the test is in flight, and nothing was changed yet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..control.admin import AdminClient
from ..control.families import family_for
from ..control.fleet import resolve_workers
from ..control.fleet_state import observe
from ..model.target import Target
from .state import RunState, state_of

RESTORED_KINDS = ("external",)
"""The deployments a run visits (given by URL); one it started, it stops."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("mutating") is not None:
        target = getattr(item, "funcargs", {}).get("rl_target")
        state = state_of(item.config)
        if isinstance(target, Target) and state.active:
            record(state, target)
    yield


def record(state: RunState, target: Target) -> None:
    """Each selected worker's state, once per target; a read that fails leaves its field
    unreported, never the test failed."""
    if target.kind not in RESTORED_KINDS or target.id in state.fleet_found:
        return
    policy = state.policy_for(target)
    found = state.fleet_found[target.id] = {}
    client = state.client
    if not policy.allowed or client is None:
        return
    admin = AdminClient(client, policy, ledger=state.ledger)
    try:
        workers = resolve_workers(client, target)
    except Exception:  # discovery unreadable: the tests say why; nothing to record
        return
    for worker in workers:
        if worker.system_url and policy.permits(worker.instance_id):
            found[worker.system_url] = observe(admin, target, worker, family_for(target, worker))
