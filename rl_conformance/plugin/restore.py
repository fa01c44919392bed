"""The run's end, for the fleet it visited: each worker the run found before its first mutation
(`plugin/fleet_record.py`) is put back and verified (`control/fleet_restore.py`), however the
run ended; a stopped run also says which workers it left held out of service (paused, released,
asleep), on which weights, and how to bring each back, then tries that, once and briefly."""

from __future__ import annotations

from typing import Any

from ..client.http import Client
from ..control.admin import AdminClient, AdminWorker
from ..control.families import family_for
from ..control.fleet import resolve_workers
from ..control.fleet_restore import WorkerRestore, restore_worker
from ..control.fleet_state import WorkerState
from ..control.ledger import AdminLedger
from .state import RunState

RESTORE_DEADLINE_S = 5.0
NOT_RESTORED_BANNER = "FLEET NOT RESTORED"
WEIGHT_ROUTES = ("update",)
"""A mutating call whose route names one of these may have changed a worker's weights."""


def restore_fleet(state: RunState) -> list[WorkerRestore]:
    """Each worker this process recorded put back as found, after the restores the run's
    forked processes sent (already on `state.fleet_restore`); all of them, kept there. Each
    result is kept as it is made: should a later step raise, `restore_failed` marks only the
    workers not yet reached."""
    targets = {target.id: target for target in state.pool.planned_targets()}
    for target_id, found in state.fleet_found.items():
        target = targets.get(target_id)
        if target is None or not found:
            continue
        state.current_target = target_id
        client = state.http()
        admin = AdminClient(client, state.policy_for(target), ledger=state.ledger)
        try:
            listed = {w.system_url: w for w in resolve_workers(client, target) if w.system_url}
        except Exception:  # discovery unreadable now: restore each worker as it was found
            listed = {}
        for url, before in found.items():
            worker = listed.get(url) or _as_found(before)
            mark = state.ledger.marks.get(url)
            holds = dict(mark.holds) if mark is not None else {}
            changed = any(
                call.system_url == url and any(word in call.route for word in WEIGHT_ROUTES)
                for call in state.ledger.history
            )
            inputs = state.run.inputs_for(target_id)
            state.fleet_restore.append(
                restore_worker(
                    admin,
                    target,
                    worker,
                    family_for(target, worker),
                    before,
                    holds=holds,
                    weights_changed=changed,
                    restore_path=inputs.restore_model_path or state.config.restore_model_path,
                )
            )
    state.fleet_found.clear()
    return state.fleet_restore


def restore_failed(state: RunState, exc: Exception) -> list[WorkerRestore]:
    """When the restore itself raised: every recorded worker it did not get to, not restored
    for that reason (so the run exits 4 and says so); all of them, kept on the state."""
    done = {(result.target_id, result.before.system_url) for result in state.fleet_restore}
    state.fleet_restore += [
        WorkerRestore(target_id, before, problems=[f"the restore itself failed ({exc})"])
        for target_id, found in state.fleet_found.items()
        for url, before in found.items()
        if (target_id, url) not in done
    ]
    state.fleet_found.clear()
    return state.fleet_restore


def fleet_restored_here(state: RunState) -> list[dict[str, Any]]:
    """For a process of the run that ends before the run does (a forked child, a pytest-xdist
    worker): the workers it changed put back now, while it alone holds what it found and did,
    as the records it hands to the run's own process."""
    try:
        results = restore_fleet(state)
    except Exception as exc:  # the run's process must still hear of it
        results = restore_failed(state, exc)
    return [result.to_json() for result in results]


def fleet_lines(results: list[WorkerRestore]) -> list[str]:
    """The fleet's final state, a line per worker; the first line names every worker not
    restored, when one is."""
    if not results:
        return []
    failed = [result for result in results if not result.restored]
    lines = []
    if failed:
        names = ", ".join(f"{r.target_id}: {r.before.label}" for r in failed)
        lines.append(
            f"{NOT_RESTORED_BANNER}: the run could not put back {names} as it found "
            "them; see fleet_restore in matrix.json before the fleet serves training again"
        )
    lines.append("the fleet as the run leaves it (found before the first mutation -> now):")
    lines += [f"  {result.line()}" for result in results]
    return lines


def not_restored_warnings(state: RunState) -> list[str]:
    """The first line of every report when a worker was not put back as found."""
    failed = [result for result in state.fleet_restore if not result.restored]
    if not failed:
        return []
    return [
        f"{NOT_RESTORED_BANNER}: "
        + "; ".join(
            f"{r.target_id}: {r.before.label}: {r.line().split(': NOT RESTORED: ')[-1]}"
            for r in failed
        )
    ]


def restore_held(ledger: AdminLedger, client: Client | None) -> list[str]:
    """Lines for the console: each touched worker's last known state and the commands that
    restore a held one, then what the bounded attempt to restore it observed."""
    touched, held = ledger.touched(), ledger.held()
    if not touched:
        return []
    lines = ["workers the stopped run had touched (last known state):"]
    lines += [f"  {mark.describe()}" for mark in touched]
    if not held:
        return [*lines, "none is held out of service"]
    lines.append("to restore the held ones by hand:")
    for mark in held:
        lines += [f"  {command}" for command in mark.restore_commands()]
    if client is None:
        return lines
    for mark in held:
        for undo in list(mark.holds.values()):
            url = f"{mark.system_url.rstrip('/')}/engine/{undo}"
            try:
                exchange = client.request("POST", url, json_body={}, deadline_s=RESTORE_DEADLINE_S)
                status = exchange.status
            except Exception as exc:  # a stopped run must still end: report and go on
                lines.append(f"restore {undo} on {mark.label}: not answered ({exc})")
                continue
            outcome = "restored" if status is not None and 200 <= status < 300 else "NOT restored"
            lines.append(f"restore {undo} on {mark.label}: HTTP {status}, {outcome}")
    return lines


def end_of_run(state: RunState, complete: bool) -> list[str]:
    """The fleet put back (every run), then, for a stopped run, the held workers no record
    covered; the console lines of both, the not-restored banner first."""
    try:
        results = restore_fleet(state)
    except Exception as exc:  # the reports must still be written
        results = restore_failed(state, exc)
    lines = fleet_lines(results)
    if not complete:
        lines += restore_held(state.ledger, state.client)
    return lines


def _as_found(before: WorkerState) -> AdminWorker:
    """A worker discovery no longer lists, addressed as it was found."""
    return AdminWorker(instance_id=before.instance_id, system_url=before.system_url, routes=None)
