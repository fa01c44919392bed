"""Checks: pure functions from observations to findings.

A check has a stable dotted ID, a level (MUST / SHOULD), and the spec sentence it enforces.
Calling it returns a `CheckResult`; a failed result lists `Violation`s that each name the field,
the expected and the observed value. Checks do no I/O, so an RL framework can import them
as a runtime guard ("verify before admitting a sample to training").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec

from ..contract import BY_ID as ROWS
from ..contract.kinds import Capability, Level

P = ParamSpec("P")
RELEASE_BEHAVIOUR = "Release behaviour (no spec sentence)"
"""The section of a check no normative sentence fixes: its failure is a release difference."""


@dataclass(frozen=True)
class Violation:
    message: str
    field: str = ""
    expected: Any = None
    observed: Any = None


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    level: Level
    spec: str
    section: str
    normative: bool = True
    """Whether `spec` quotes the sentence a failure violates. A check no normative sentence
    fixes (`spec` then says where its expectation comes from: a release's recorded behaviour)
    reports a release difference, flagged on its cell, never a failure."""


@dataclass(frozen=True)
class CheckResult:
    spec: CheckSpec
    violations: tuple[Violation, ...] = field(default_factory=tuple)

    @property
    def check_id(self) -> str:
        return self.spec.id

    @property
    def passed(self) -> bool:
        return not self.violations

    def explain(self) -> str:
        """h2spec-style explanation: the requirement, then each violation with expected/observed."""
        lines = [
            f"[{self.spec.level}] {self.spec.id}: {self.spec.title}",
            f"  spec ({self.spec.section}): {self.spec.spec}",
        ]
        for violation in self.violations:
            lines.append(f"  - {violation.message}")
            if violation.field:
                lines.append(f"      field:    {violation.field}")
            if violation.expected is not None or violation.observed is not None:
                lines.append(f"      expected: {_clip(violation.expected)}")
                lines.append(f"      observed: {_clip(violation.observed)}")
        return "\n".join(lines)


class Check(Generic[P]):
    """A registered check: call it with its observations, get a `CheckResult`.

    `family` says how the check is proven able to fail: `rule` checks by a fault of our fakes
    that breaks exactly their rule (the kill matrix), `schema` checks by the invalid examples
    of their schema (tests/test_schema_invalid_cases.py)."""

    def __init__(
        self, spec: CheckSpec, find: Callable[P, Iterable[Violation]], family: str = "rule"
    ) -> None:
        self.spec = spec
        self.family = family
        self._find = find
        functools.update_wrapper(self, find)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> CheckResult:
        return CheckResult(self.spec, tuple(self._find(*args, **kwargs)))


class Folded:
    """An observation folded as it arrived (`stream_fold.StreamFold`). A check that accepts one
    in place of the list it stands for judges it as it judges that list."""


REGISTRY: dict[str, Check[Any]] = {}

Findings = Iterator[Violation]


def register(check_: Check[P]) -> Check[P]:
    if check_.spec.id in REGISTRY:
        raise ValueError(f"check {check_.spec.id!r} registered twice")
    REGISTRY[check_.spec.id] = check_
    return check_


def rule_ids() -> list[str]:
    """The checks the kill matrix must see fail, one fault at least each."""
    return sorted(check_id for check_id, found in REGISTRY.items() if found.family == "rule")


def check(
    subject: Capability | str,
    *,
    title: str | None = None,
    level: Level = Level.MUST,
    spec: str | None = None,
    section: str | None = None,
    normative: bool = True,
) -> Callable[[Callable[P, Iterable[Violation]]], Check[P]]:
    """Register a generator of violations as a named check returning a `CheckResult`.

    `check(ROW)`: a row's own check, whose id, level, section and sentence are the row's
    (`rl_conformance.contract`), declared nowhere else. `check("area.name", title=..., spec=...,
    section=...)`: a finer rule a suite hands its evidence to beside a row's, or a general one
    (`http.*`, `schema.*`); its id is no row's. `normative=False`: no spec sentence fixes what
    it judges, so its failure is a flagged release difference, never a fail (a row's own check
    is always normative)."""
    if isinstance(subject, Capability):
        overridden = (title, spec, section) != (None, None, None) or level is not Level.MUST
        if overridden or not normative:
            raise TypeError(
                f"check({subject.id}): a row's own check takes its title, level, section and "
                "sentence from the row; change them in rl_conformance/contract"
            )
        check_spec = CheckSpec(
            id=subject.id,
            title=subject.statement,
            level=subject.level,
            spec=subject.quote,
            section=subject.section,
        )
    else:
        if subject in ROWS:
            raise ValueError(
                f"check {subject!r} has a row's id: declare it as check(contract.<area>.<ROW>)"
            )
        if title is None or spec is None or section is None:
            raise TypeError(f"check {subject!r} is no row's: it needs title, spec and section")
        check_spec = CheckSpec(subject, title, level, spec, section, normative)

    def decorate(func: Callable[P, Iterable[Violation]]) -> Check[P]:
        return register(Check(check_spec, func))

    return decorate


def _clip(value: Any, limit: int = 240) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# Field access that never raises: checks must survive any shape a deployment sends.

_MISSING = object()


def get_path(obj: Any, *path: str | int) -> Any:
    """Follow keys/indices; returns `MISSING` if any step does not exist."""
    current = obj
    for step in path:
        if isinstance(step, int):
            if not isinstance(current, list) or not -len(current) <= step < len(current):
                return MISSING
            current = current[step]
        else:
            if not isinstance(current, dict) or step not in current:
                return MISSING
            current = current[step]
    return current


MISSING: Any = _MISSING


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_int_list(value: Any) -> bool:
    return isinstance(value, list) and all(is_int(item) for item in value)


def describe(value: Any) -> Any:
    return "(absent)" if value is MISSING else value
