"""Putting a worker back as the run found it (`fleet_state`): every hold the run left open
undone, the weights it found loaded again when the run changed them, a worker found paused
paused again, and the result verified by a generation pinned to it, compared with the one taken
before the first mutation. What cannot be put back, or whose verification disagrees, is said
as such: the run's operator must act before the fleet serves again."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from ..model.target import Target
from .admin import AdminClient, AdminWorker
from .families import AdminFamily, new_version
from .fleet_state import DISCOVERY_MODEL, WorkerState, observe, probe_answer, same_weights

STEP_DEADLINE_S = 30.0
"""Each restoring call: a restore runs while the run ends, and must end too."""
WORKER_RESTORE_S = 12 * STEP_DEADLINE_S
"""The most one worker's restore takes: its holds undone, a reload's four steps, the probe, a
pause again and the reads after, each bounded."""


@dataclass
class WorkerRestore:
    """One worker's restore: the state found, the state left, what was done and whether the
    worker serves what it served before (`verified`: None where nothing could tell)."""

    target_id: str
    before: WorkerState
    after: WorkerState | None = None
    actions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    verified: bool | None = None
    verification: str = ""
    document: dict[str, Any] | None = field(default=None, repr=False)
    """The record as another process of the run wrote it (`from_json`), kept whole."""

    @property
    def restored(self) -> bool:
        return not self.problems and self.verified is not False

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> WorkerRestore:
        """The restore a forked process of the run made and sent as `to_json`: enough of it for
        the console and the banner, and the record itself for the reports."""
        before = WorkerState(
            document["worker"], document["system_url"], None, document.get("family")
        )
        return cls(
            document["target"],
            before,
            actions=list(document.get("actions", [])),
            problems=list(document.get("problems", [])),
            verified=document.get("verified"),
            verification=document.get("verification", ""),
            document=dict(document),
        )

    def to_json(self) -> dict[str, Any]:
        if self.document is not None:
            return dict(self.document)
        document: dict[str, Any] = {
            "target": self.target_id,
            "worker": self.before.label,
            "system_url": self.before.system_url,
            "family": self.before.family,
            "before": self.before.to_json(),
            "after": self.after.to_json() if self.after is not None else None,
            "actions": list(self.actions),
            "verified": self.verified,
            "verification": self.verification,
            "restored": self.restored,
        }
        if self.problems:
            document["problems"] = list(self.problems)
        return document

    def line(self) -> str:
        """One console line: the worker and how it was left."""
        head = f"{self.target_id}: {self.before.label} ({self.before.system_url})"
        if not self.restored:
            return f"{head}: NOT RESTORED: {'; '.join(self.problems or [self.verification])}"
        done = ", ".join(self.actions) or "nothing to undo"
        checked = {True: "verified", None: "not verified"}[self.verified]
        return f"{head}: restored ({done}); {checked}: {self.verification}"


def restore_worker(
    admin: AdminClient,
    target: Target,
    worker: AdminWorker,
    family: AdminFamily | None,
    before: WorkerState,
    *,
    holds: dict[str, str],
    weights_changed: bool,
    restore_path: str | None,
    restore_path_source: str = "--restore-model-path",
) -> WorkerRestore:
    """Undo `holds` (route -> its undo), load the weights found again when `weights_changed`
    (from `restore_path`, else the path the worker reported), pause again a worker found
    paused, then verify with a pinned generation. Never raises: a step that fails is a
    problem of the result."""
    result = WorkerRestore(target.id, before)
    for held, undo in holds.items():
        _step(result, admin, worker, undo, {}, f"{undo} (undoing {held})")
    cannot_reload = None
    if weights_changed:
        cannot_reload = _reload(
            result, admin, worker, family, before, restore_path, restore_path_source
        )
    if before.probe is None:
        result.verification = before.probe_note or "no answer was taken before the run"
    else:
        now, note, _ = probe_answer(admin.client, target, worker)
        if now is None:
            result.verified, result.verification = False, f"after the restore, {note}"
        else:
            result.verified, result.verification = same_weights(before.probe, now)
        if worker.instance_id is None:
            result.verification += " (unpinned: the worker names no instance id)"
    if cannot_reload is not None:
        if result.verified:  # the run's last update was already undone, or left its weights
            result.actions.append(f"no reload: {cannot_reload}, and the probe agrees")
        else:
            result.problems.append(f"the run changed its weights; {cannot_reload}")
    if before.paused and family is not None:
        _step(result, admin, worker, family.pause, family.pause_body(), "paused again, as found")
    result.after = observe(admin, target, worker, family, probe=False)
    if before.paused is not None and result.after.paused not in (None, before.paused):
        result.problems.append(
            f"found {'paused' if before.paused else 'serving'}, left "
            f"{'paused' if result.after.paused else 'serving'}"
        )
    return result


def _reload(
    result: WorkerRestore,
    admin: AdminClient,
    worker: AdminWorker,
    family: AdminFamily | None,
    before: WorkerState,
    restore_path: str | None,
    restore_path_source: str,
) -> str | None:
    """Pause, update from the path found (the version found with it), flush, resume. Returns
    why the weights cannot be loaded again (None: the reload was sent); the caller decides
    whether that matters by what the verification sees."""
    path, source = (
        (restore_path, restore_path_source)
        if restore_path
        else (
            before.model_path,
            before.model_path_source,
        )
    )
    if family is None:
        return "it speaks no known family"
    if family.update_kind != "disk":
        return f"a {family.name} worker takes weights by transfer, which no path restores"
    if not path:
        return "the deployment reports no served model path: give --restore-model-path PATH"
    if source == DISCOVERY_MODEL and not PurePosixPath(path).is_absolute():
        return (
            f"discovery's model {path!r} is a served name, not a checkpoint path the engine "
            "can load: give --restore-model-path PATH"
        )
    version = before.weight_version if isinstance(before.weight_version, str) else None
    body = {"model_path": path, "weight_version": version or new_version()}
    if not _step(result, admin, worker, family.pause, family.pause_body(), "paused"):
        return None
    try:
        _step(result, admin, worker, family.update_routes[0], body, f"reloaded {path} ({source})")
        if family.flush:
            _step(result, admin, worker, family.flush, {}, family.flush)
    finally:
        _step(result, admin, worker, family.resume, {}, "resumed")
    return None


def _step(
    result: WorkerRestore,
    admin: AdminClient,
    worker: AdminWorker,
    route: str,
    body: dict[str, Any],
    action: str,
) -> bool:
    """One restoring call; a refusal or no answer is a problem of the result."""
    status: int | None = None
    try:
        exchange = admin.call(worker, route, body, deadline_s=STEP_DEADLINE_S)
        status = exchange.status
        reply = exchange.reply()
    except Exception as exc:  # a stopped run must still end: say it and go on
        result.problems.append(f"{route}: not answered ({exc})")
        return False
    refused = isinstance(reply, dict) and (
        reply.get("success") is False or reply.get("status") in ("error", "failed")
    )
    if status is None or not 200 <= status < 300 or refused:
        detail = "" if reply is None else str(reply)[:200]
        result.problems.append(f"{route}: HTTP {status} {detail}".rstrip())
        return False
    result.actions.append(action)
    return True
