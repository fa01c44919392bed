"""Whether a matrix can be compared with another, and why not, said once.

A run is comparable when it completed and reached every target: then each of its cells says
something of the deployment. It is not when it was cut short (`--run-timeout`, SIGINT, SIGTERM,
a process that died, a matrix rebuilt from its records) or did not reach a target (the preflight
found the user's input wrong, a plane refused the run's credentials, the deployment did not
start or answer). `matrix.json` says which (`comparable`, and `not_comparable`: the cause and one
line naming it); `diff` and `baseline` compare only the cells such a run reached, never call the
others regressions, and a baseline is only ever a comparable run.

A matrix written before these fields existed is judged from what it has: `complete`,
`incomplete_reason` and each target's `unreached`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import exits

TIMED_OUT = "timed out"
INTERRUPTED = "interrupted"
TERMINATED = "terminated"
CUT_SHORT = "cut short"
"""A run that ended before its report for another reason (a process that died, a matrix
rebuilt from its records)."""
PREFLIGHT_REFUSED = "preflight refused"
"""The preflight found an input the deployment contradicts (a URL that is not what its flag
names, a `--model` it does not serve, a `--worker` its discovery does not list): exit 2."""
NOT_AUTHORISED = "not authorised"
"""A plane answered 401 or 403: the run's credentials are missing, wrong or expired."""
NOT_REACHED = "not reached"
"""The deployment did not start, or a plane the user gave did not answer."""
TARGET_CAUSES = (PREFLIGHT_REFUSED, NOT_AUTHORISED, NOT_REACHED)
"""Why a target was not reached (`targets[].unreached_kind`), the one to fix first first."""
CAUSES = (TIMED_OUT, INTERRUPTED, TERMINATED, CUT_SHORT, *TARGET_CAUSES)

NOT_RUN_PREFIX = "not reached: "
"""How the reason of a cell a cut run never reached starts (`matrix.build_matrix`)."""

_BY_STOP = {
    exits.EXIT_TIMEOUT: TIMED_OUT,
    exits.EXIT_INTERRUPTED: INTERRUPTED,
    exits.EXIT_TERMINATED: TERMINATED,
}


@dataclass(frozen=True)
class Comparability:
    cause: str | None = None
    """One of `CAUSES`; None for a comparable run."""
    reason: str = ""
    """One line naming the cause: the stop reason, or the target's `unreached` sentence."""

    @property
    def comparable(self) -> bool:
        return self.cause is None

    def to_json(self) -> dict[str, str] | None:
        return None if self.cause is None else {"cause": self.cause, "reason": self.reason}

    def sentence(self) -> str:
        return "comparable" if self.cause is None else f"{self.cause}: {self.reason}"


COMPARABLE = Comparability()


def target_cause(target: Mapping[str, Any]) -> str | None:
    """Why a target (`targets[]` of `matrix.json`) was not reached, one of `TARGET_CAUSES`; None
    when it was."""
    if not target.get("unreached"):
        return None
    kind = target.get("unreached_kind")
    return kind if kind in TARGET_CAUSES else NOT_REACHED


def judge(
    complete: bool, incomplete_reason: str | None, targets: Iterable[Mapping[str, Any]]
) -> Comparability:
    """The run's comparability: a cut run's stop first (what ended the night), then the most
    telling target not reached (an input to fix before a deployment to wait for)."""
    if not complete:
        reason = incomplete_reason or "the run was interrupted"
        return Comparability(_BY_STOP.get(exits.for_stop(reason), CUT_SHORT), reason)
    unreached = [(target_cause(target), target) for target in targets]
    found = [(cause, target) for cause, target in unreached if cause is not None]
    if not found:
        return COMPARABLE
    cause, target = min(found, key=lambda item: TARGET_CAUSES.index(str(item[0])))
    reason = " ".join(str(target["unreached"]).split())
    if len(found) > 1:
        reason += f" (and {len(found) - 1} more target(s) not reached)"
    return Comparability(cause, reason)


def of_matrix(document: Mapping[str, Any]) -> Comparability:
    """What a `matrix.json` says of itself, or, for one written before it said so, what its
    completeness and targets show."""
    said = document.get("not_comparable")
    if document.get("comparable") is True:
        return COMPARABLE
    if isinstance(said, Mapping) and said.get("cause") in CAUSES:
        return Comparability(str(said["cause"]), str(said.get("reason", "")))
    return judge(
        bool(document.get("complete", True)),
        document.get("incomplete_reason"),
        [target for target in document.get("targets") or () if isinstance(target, Mapping)],
    )


def not_run(cell: Mapping[str, Any]) -> bool:
    """Whether a cell is one a cut run never reached: no test of it ran, so it says nothing of
    the deployment (`not_run`, or, in a matrix written before that field, its reason)."""
    if "not_run" in cell:
        return bool(cell["not_run"])
    return not cell.get("tests") and str(cell.get("reason", "")).startswith(NOT_RUN_PREFIX)
