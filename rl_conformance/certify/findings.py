"""What the checklist's judges say, in the harness's words.

An item's judge (`@judges(contract.adapter.ITEM)`) is a pure function of one scenario's
`Evidence` returning a `Ruling`: `passed` with what it verified, `failed` with the exchange
that shows the violation, `never_exercised` when the scenario gave it nothing to judge (no item
passes on zero observations, and the skip names what would have exercised it: the item's
`exercised_by`), or `not_applicable`. The registered judge puts the item's id on its ruling and
returns a `Finding`, so no judge names its own item again.

The outcomes are the matrix's (`model.matrix.Outcome`): `pass`, `fail`, `skipped`, and
`not-applicable` for an item of the half of the protocol the adapter does not implement.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..contract.kinds import ChecklistItem
from ..model.matrix import Outcome
from .evidence import Evidence

NEVER_EXERCISED = "never exercised"


@dataclass(frozen=True)
class Finding:
    """One item's verdict on one scenario: an entry of the scenario's `findings` in its audit
    log, and a test record of the adapter matrix."""

    check_id: str
    outcome: Outcome
    message: str
    expected: Any = None
    observed: Any = None


@dataclass(frozen=True)
class Ruling:
    """A judge's verdict before its item's id is put on it (`Judge`)."""

    outcome: Outcome
    message: str
    expected: Any = None
    observed: Any = None
    exercised: bool = True
    """False: the item was never exercised, `message` says why."""


def passed(message: str) -> Ruling:
    return Ruling(Outcome.PASS, message)


def failed(message: str, expected: Any, observed: Any) -> Ruling:
    return Ruling(Outcome.FAIL, message, expected, observed)


def never_exercised(why: str) -> Ruling:
    """The item was never exercised in this scenario: `why` (its finding adds what would
    exercise it)."""
    return Ruling(Outcome.SKIPPED, why, exercised=False)


def not_applicable(message: str) -> Ruling:
    return Ruling(Outcome.NOT_APPLICABLE, message)


class Judge:
    """An item's registered judge: call it with one scenario's evidence, get the item's
    `Finding`."""

    def __init__(self, item: ChecklistItem, rule: Callable[[Evidence], Ruling]) -> None:
        self.item = item
        self._rule = rule
        functools.update_wrapper(self, rule)

    def __call__(self, evidence: Evidence) -> Finding:
        ruling = self._rule(evidence)
        message = ruling.message
        if not ruling.exercised:
            message = f"{NEVER_EXERCISED}: {message} (exercised by {self.item.exercised_by})"
        return Finding(self.item.id, ruling.outcome, message, ruling.expected, ruling.observed)


JUDGES: dict[str, Judge] = {}
"""Item id -> its judge, filled as the judges' modules are imported (`checklist` imports them
all and orders them as `contract.adapter.ITEMS`)."""


def judges(item: ChecklistItem) -> Callable[[Callable[[Evidence], Ruling]], Judge]:
    """Register the decorated function as `item`'s one judge."""

    def register(rule: Callable[[Evidence], Ruling]) -> Judge:
        if item.id in JUDGES:
            raise ValueError(f"checklist item {item.id!r} has two judges")
        JUDGES[item.id] = Judge(item, rule)
        return JUDGES[item.id]

    return register
