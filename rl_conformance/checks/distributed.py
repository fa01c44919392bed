"""The distributed update and the version-metadata route, judged by what a coordinator relies on:
each call of the documented sequence succeeds by its family's status AND body, in its order
(`init_weights_update_group` -> `update_weights_from_distributed` ->
`destroy_weights_update_group`), the version it declares is the one the worker then reports, and
a call the worker cannot honour (an update with no group formed, a body its schema refuses) fails
closed: it is not answered as a success and leaves the version the worker reported before.

Any refusal is closed: a handled error body, a 4xx, or the 500 Dynamo answers when the engine's
request object refuses the body (SGLang's `Req(**body)` constructor, the native sidecar's
`InvalidRequest`). What moves the weights (an NCCL group with the trainer's ranks) is not part of
this observation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import contract
from .admin import success_semantics
from .base import MISSING, Findings, Violation, check, describe


@dataclass(frozen=True)
class Call:
    """One administrative call and how it was answered."""

    what: str
    route: str
    status: int | None
    body: Any
    succeeded: bool

    @property
    def answer(self) -> dict[str, Any]:
        return {"status": self.status, "body": self.body}


@dataclass(frozen=True)
class Refused:
    """A call the worker must refuse, and the version it reported before and after it."""

    call: Call
    why: str
    """Why no worker can honour it (no group formed, a body its schema refuses)."""
    before: Any
    after: Any


@dataclass(frozen=True)
class VersionedUpdate:
    """One worker's run of a sequence that declares a version."""

    family: str
    worker: str
    sequence: Sequence[Call]
    declared: Any
    reported: Any = MISSING
    """The version the worker reported once the sequence was over (MISSING: not read)."""
    refused: Sequence[Refused] = field(default_factory=tuple)


def call(family: str, what: str, route: str, status: int | None, body: Any) -> Call:
    return Call(what, route, status, body, success_semantics(family, route, status, body).passed)


@check(contract.admin.DISTRIBUTED_UPDATE)
def versioned_update(update: VersionedUpdate) -> Findings:
    where = f"on {update.worker}"
    for step in update.sequence:
        if not step.succeeded:
            yield Violation(
                f"{step.what} ({step.route}) {where} did not succeed: HTTP {step.status}, "
                f"{describe(step.body)!r}",
                step.route,
                "success by status and body",
                step.answer,
            )
            return
    if update.reported is not MISSING and update.reported != update.declared:
        yield Violation(
            f"after the sequence declared version {update.declared!r}, {update.worker} reports "
            f"{update.reported!r}",
            "weight version",
            update.declared,
            update.reported,
        )
    for refused in update.refused:
        step = refused.call
        if step.succeeded:
            yield Violation(
                f"{step.what} ({step.route}) {where} was answered as a success although "
                f"{refused.why}: it failed open",
                step.route,
                "a refusal (an error body, a 4xx, or the engine's 500)",
                step.answer,
            )
        if refused.after != refused.before:
            yield Violation(
                f"{step.what} ({step.route}) {where} changed the reported version from "
                f"{refused.before!r} to {refused.after!r} although {refused.why}",
                "weight version",
                refused.before,
                refused.after,
            )
