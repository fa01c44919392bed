"""A run stopped while it held workers out of service (paused, released, asleep): say which, on
which weights, and how to bring each back; then try that, once and briefly, since the user
allowed the hold in the first place."""

from __future__ import annotations

from ..client.http import Client
from ..control.ledger import AdminLedger

RESTORE_DEADLINE_S = 5.0


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
