"""The result model: test records folded into the compatibility matrix (capabilities x targets).

One outcome vocabulary (`Outcome`) for tests, cells and the adapter checklist's findings. A
test may also end `absent` (the deployment lacks the feature); its cell then becomes `fail`
where the spec documents the feature as supported and `unsupported` otherwise. A checklist item
may end `not-applicable` (a half of the protocol the adapter does not implement); its cell is
`unsupported`. Every cell gets exactly one outcome; when a capability has several tests on one
target the precedence is error > fail > unsupported > not-advertised > pass > skipped: one
failing test fails the cell, a harness problem is never hidden behind a pass, and a capability
that selected zero tests for a target is an `error`, never a pass.

`Matrix.to_json()` is `matrix.json` (validated by `schemas/matrix.json` in the tests); the report
writers render that document.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from ..version import __version__
from . import comparability, exits
from .capabilities import Capability, Support
from .evidence import Evidence
from .releases import SURFACES, Surface, missing_in
from .target import Target
from .worker_sample import sample_note

__all__ = ["Evidence"]  # re-exported: its home was here

SCHEMA_VERSION = 1
UNCOVERED_PREFIX = "not covered by --budget-generations"
SUITE_NAME = "dynamo-rl-conformance"
RECORD_SOURCE = "--record"


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNSUPPORTED = "unsupported"
    NOT_ADVERTISED = "not-advertised"
    SKIPPED = "skipped"
    ERROR = "error"
    ABSENT = "absent"
    """A test's only: the feature is absent; the cell decides from the documented support."""
    NOT_APPLICABLE = "not-applicable"
    """An adapter checklist finding's only: the item is about the half of the protocol the
    adapter does not implement (or the fleet's family does not have); its cell is
    `unsupported`."""


def _passed_reason(outcomes: list[tuple[Outcome, TestRecord]]) -> str:
    """A passing cell's reason: how many of its tests passed, and how many did not run, with
    the first one's reason, and the workers a passing test judged when it judged a sample of
    the selected ones (a pass never claims the tests it did not run, nor workers it did not
    observe)."""
    passed = sum(1 for outcome, _ in outcomes if outcome is Outcome.PASS)
    others = [record for outcome, record in outcomes if outcome is not Outcome.PASS]
    samples = [
        record.measured["judged_workers"]
        for outcome, record in outcomes
        if outcome is Outcome.PASS and isinstance(record.measured.get("judged_workers"), dict)
    ]
    sampled = f"; {sample_note(samples[0])}" if samples else ""
    if not others:
        return f"{passed} test(s) passed{sampled}"
    return f"{passed} test(s) passed, {len(others)} did not run ({others[0].reason}){sampled}"


PRECEDENCE = (
    Outcome.ERROR,
    Outcome.FAIL,
    Outcome.UNSUPPORTED,
    Outcome.NOT_ADVERTISED,
    Outcome.PASS,
    Outcome.SKIPPED,
)
CELL_OUTCOMES = (
    Outcome.PASS,
    Outcome.FAIL,
    Outcome.UNSUPPORTED,
    Outcome.NOT_ADVERTISED,
    Outcome.SKIPPED,
    Outcome.ERROR,
)


@dataclass
class TestRecord:
    __test__ = False
    nodeid: str
    capabilities: tuple[str, ...]
    target_id: str
    outcome: Outcome
    reason: str = ""
    duration_s: float = 0.0
    checks: list[tuple[str, bool]] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    reproducer: str | None = None
    """The test's requests as curl commands, in order, when no single exchange shows the
    failure (a refresh sequence, a feature found absent)."""
    generations: int = 0
    """Generation requests the test sent (`budget`)."""
    wire: dict[str, Any] | None = None
    """The wire log of `reproducer`'s requests (`wire.sequence_wire_log`), when it is a
    sequence: what a cell's evidence built from this record refers to."""
    measured: dict[str, Any] = field(default_factory=dict)
    """Facts the test measured beyond its verdict (the version it sent, the workers it verified,
    a trace join's counts): what an evidence record's gate fields are filled from."""
    differences: list[Evidence] = field(default_factory=list)
    """Release differences: what checks no normative sentence fixes found (`Verdict.differences`),
    whatever the test's outcome."""

    def to_json(self) -> dict[str, Any]:
        """A record as JSON, to cross a process boundary (a parallel run's workers)."""
        return {
            "nodeid": self.nodeid,
            "capabilities": list(self.capabilities),
            "target_id": self.target_id,
            "outcome": self.outcome.value,
            "reason": self.reason,
            "duration_s": self.duration_s,
            "checks": [[check_id, passed] for check_id, passed in self.checks],
            "evidence": [item.to_json() for item in self.evidence],
            "reproducer": self.reproducer,
            "generations": self.generations,
            "wire": self.wire,
            "measured": self.measured,
            "differences": [item.to_json() for item in self.differences],
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> TestRecord:
        return cls(
            nodeid=document["nodeid"],
            capabilities=tuple(document["capabilities"]),
            target_id=document["target_id"],
            outcome=Outcome(document["outcome"]),
            reason=document.get("reason", ""),
            duration_s=float(document.get("duration_s", 0.0)),
            checks=[(str(check_id), bool(passed)) for check_id, passed in document["checks"]],
            evidence=[Evidence.from_json(item) for item in document.get("evidence", [])],
            reproducer=document.get("reproducer"),
            generations=int(document.get("generations", 0)),
            wire=document.get("wire"),
            measured=dict(document.get("measured") or {}),
            differences=[Evidence.from_json(item) for item in document.get("differences", [])],
        )


@dataclass
class Cell:
    outcome: Outcome
    reason: str
    documented: Support
    contradicts_documentation: bool
    checks: list[dict[str, Any]]
    tests: list[dict[str, Any]]
    evidence: list[Evidence]
    duration_s: float
    not_run: bool = False
    """A cut run never reached this cell: no test of it ran (`comparability.not_run`)."""
    differences: list[Evidence] = field(default_factory=list)
    """Release differences its tests found (`release_differences`): behaviour no normative
    sentence fixes, flagged with its evidence whatever the outcome."""

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "reason": self.reason,
            "documented": self.documented.value,
            "contradicts_documentation": self.contradicts_documentation,
            "checks": self.checks,
            "tests": self.tests,
            "evidence": [item.to_json() for item in self.evidence],
            "duration_s": round(self.duration_s, 4),
            **({"not_run": True} if self.not_run else {}),
            **(
                {"release_differences": [item.to_json() for item in self.differences]}
                if self.differences
                else {}
            ),
        }


def _cell_outcome(record: TestRecord, documented: Support) -> tuple[Outcome, str, bool]:
    """Outcome of one test on a cell, its reason, and whether it contradicts the documentation."""
    if record.outcome is Outcome.ABSENT:
        if documented is Support.SUPPORTED:
            return Outcome.FAIL, f"documented as supported, but absent: {record.reason}", True
        return (
            Outcome.UNSUPPORTED,
            f"documented {documented.value}; observed: {record.reason}",
            False,
        )
    contradicts = record.outcome is Outcome.PASS and documented is Support.UNSUPPORTED
    reason = "documented as unsupported, yet observed working" if contradicts else record.reason
    return record.outcome, reason, contradicts


def build_cell(
    capability: Capability,
    target: Target,
    records: Sequence[TestRecord],
    surfaces: tuple[Surface, ...] = SURFACES,
) -> Cell:
    documented = capability.support_for(target.backend)
    lacking = missing_in(target.release, capability.id, surfaces)
    if lacking:
        documented = Support.UNSUPPORTED
        records = [
            replace(
                record,
                outcome=Outcome.ABSENT if record.outcome is Outcome.FAIL else record.outcome,
                reason=f"not in Dynamo {target.release} ({lacking[0].title}): {record.reason}",
            )
            for record in records
        ]
    if not records:
        return Cell(
            Outcome.ERROR,
            "no test selected for this capability",
            documented,
            False,
            [],
            [],
            [],
            0.0,
        )
    outcomes = [(_cell_outcome(record, documented), record) for record in records]
    chosen = min(outcomes, key=lambda item: PRECEDENCE.index(item[0][0]))
    (outcome, reason, _), chosen_record = chosen
    if outcome is Outcome.PASS and not reason:
        reason = _passed_reason([(found[0], record) for found, record in outcomes])
    contradicts = any(item[0][2] for item in outcomes if item[0][0] is outcome)
    counts: Counter[tuple[str, bool]] = Counter()
    for record in records:
        counts.update(record.checks)
    check_ids = sorted({check_id for check_id, _ in counts})
    checks = [
        {
            "id": check_id,
            "outcome": "fail" if counts[(check_id, False)] else "pass",
            "count": counts[(check_id, True)] + counts[(check_id, False)],
        }
        for check_id in check_ids
    ]
    evidence = [item for record in records for item in record.evidence][:10]
    if outcome is Outcome.FAIL and not evidence:
        absent = next((r for r in records if r.outcome is Outcome.ABSENT), None)
        if absent is not None:
            evidence = [
                Evidence(
                    capability.id,
                    f"documented as supported for {target.backend}, but absent",
                    "",
                    f"{capability.title} ({documented.value} for {target.backend})",
                    absent.reason,
                    absent.reproducer,
                    absent.wire,
                )
            ]
    tests = [
        {
            "nodeid": record.nodeid,
            "outcome": record.outcome.value,
            "duration_s": round(record.duration_s, 4),
            "generations": record.generations,
            **({"measured": record.measured} if record.measured else {}),
        }
        for record in records
    ]
    return Cell(
        outcome,
        reason or chosen_record.reason,
        documented,
        contradicts,
        checks,
        tests,
        evidence,
        sum(record.duration_s for record in records),
        differences=[item for record in records for item in record.differences][:10],
    )


@dataclass
class RunInfo:
    started_at: datetime
    finished_at: datetime
    complete: bool
    seed: int | None
    incomplete_reason: str | None = None
    command: list[str] = field(default_factory=lambda: list(sys.argv))
    """How the run was started (the launch commands of targets are in their notes/versions)."""
    budget_generations: int | None = None
    """`--budget-generations`: the cap on generation requests per target, if any."""
    recorded: dict[str, str] = field(default_factory=dict)
    """`--record KEY=VALUE`: what the user said of the deployment (not observed)."""
    environment: dict[str, Any] = field(default_factory=dict)
    """Where the run happened, when known from elsewhere (a matrix rebuilt from the run's
    journal on another machine); empty: this process's."""
    warnings: tuple[str, ...] = ()
    """What every rendering opens with: what a reader must know before trusting any cell (a run
    that verified no TLS certificate)."""


def environment(run: RunInfo) -> dict[str, Any]:
    """Where and how the matrix was produced: suite, Python, host, command, seed, times."""
    found = {
        "suite_version": __version__,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
    }
    found.update({key: run.environment[key] for key in found if key in run.environment})
    return {
        **found,
        "command": _command(run.command),
        "seed": run.seed,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
    }


@dataclass
class Row:
    capability: Capability
    cells: dict[str, Cell]

    def to_json(self) -> dict[str, Any]:
        capability = self.capability
        return {
            "id": capability.id,
            "title": capability.title,
            "level": capability.level.value,
            "area": capability.area,
            "spec": {"section": capability.section, "quote": capability.quote},
            "documented": {
                backend.value: support.value for backend, support in capability.documented.items()
            },
            "cells": {target_id: cell.to_json() for target_id, cell in self.cells.items()},
        }


@dataclass(frozen=True)
class ExitRule:
    """What makes a command exit 1: a cell whose outcome is in `failing`, on a target not in
    `exempt`, or any of `problems`; and, always, an incomplete run. The default is a conformance
    run's: any `fail` or `error` cell. A study states its own (`rl-conformance profiles`: a `fail`
    is an answer, only an `error` is not; `certify-adapter --reference`: the broken twins are
    meant to fail, the adapters under test decide)."""

    failing: tuple[Outcome, ...] = (Outcome.FAIL, Outcome.ERROR)
    exempt: Mapping[str, str] = field(default_factory=dict)
    """Target id -> why its cells do not decide the exit status."""
    problems: tuple[str, ...] = ()
    """Further reasons the command failed (a broken twin that did not fail as reviewed)."""

    @property
    def is_default(self) -> bool:
        return self == ExitRule()

    def to_json(self) -> dict[str, Any]:
        return {
            "failing": [outcome.value for outcome in self.failing],
            "exempt": dict(self.exempt),
            "problems": list(self.problems),
        }


@dataclass
class Matrix:
    run: RunInfo
    targets: list[Target]
    rows: list[Row]
    generations: dict[str, int] = field(default_factory=dict)
    """Generation requests sent to each target by the tests (every test's count, summed)."""
    exit_rule: ExitRule = field(default_factory=ExitRule)
    fleet_restore: list[dict[str, Any]] = field(default_factory=list)
    """Each worker of a deployment given by URL the run mutated: found, left, verified."""

    @property
    def not_restored(self) -> list[dict[str, Any]]:
        """The workers the run could not put back as it found them."""
        return [worker for worker in self.fleet_restore if not worker.get("restored")]

    @property
    def summary(self) -> dict[str, int]:
        counts: Counter[str] = Counter({outcome.value: 0 for outcome in CELL_OUTCOMES})
        counts.update(cell.outcome.value for row in self.rows for cell in row.cells.values())
        return {outcome.value: counts[outcome.value] for outcome in CELL_OUTCOMES}

    @property
    def exit_status(self) -> int:
        """0 if and only if the run completed, reached every target and no cell is fail or
        error (`exit_rule`: the outcomes that count, the targets that do not, and any further
        problem). A run that stopped says how (`exits.for_stop`); one whose preflight refused an
        input is `EXIT_USAGE` (the command is to be fixed); one whose only failing cells belong
        to targets it never reached is `EXIT_UNREACHED`, not a deployment's failure. Before all
        of these: a worker the run could not put back as it found it (`EXIT_NOT_RESTORED`)."""
        rule = self.exit_rule
        if self.not_restored:
            return exits.EXIT_NOT_RESTORED
        if not self.run.complete:
            return exits.for_stop(self.run.incomplete_reason)
        if rule.problems:
            return exits.EXIT_FAILED
        unreached = {
            target.id: comparability.target_cause(target.describe())
            for target in self.targets
            if target.unreached and target.id not in rule.exempt
        }
        if comparability.PREFLIGHT_REFUSED in unreached.values():
            return exits.EXIT_USAGE
        failing = {
            target_id
            for row in self.rows
            for target_id, cell in row.cells.items()
            if target_id not in rule.exempt and cell.outcome in rule.failing
        }
        if failing - set(unreached):
            return exits.EXIT_FAILED
        return exits.EXIT_UNREACHED if unreached else exits.EXIT_OK

    def judged_comparability(self) -> comparability.Comparability:
        """Whether this matrix can be compared with another, and why not."""
        return comparability.judge(
            self.run.complete,
            self.run.incomplete_reason,
            [target.describe() for target in self.targets],
        )

    def cell(self, capability_id: str, target_id: str) -> Cell:
        row = next(row for row in self.rows if row.capability.id == capability_id)
        return row.cells[target_id]

    def to_json(self) -> dict[str, Any]:
        run = self.run
        document: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "suite": {"name": SUITE_NAME, "version": __version__},
            "complete": run.complete,
        }
        if run.incomplete_reason:
            document["incomplete_reason"] = run.incomplete_reason
        if run.warnings:
            document["warnings"] = list(run.warnings)
        judged = self.judged_comparability()
        document["comparable"] = judged.comparable
        if not judged.comparable:
            document["not_comparable"] = judged.to_json()
        document.update(
            {
                "started_at": _iso(run.started_at),
                "finished_at": _iso(run.finished_at),
                "duration_s": round((run.finished_at - run.started_at).total_seconds(), 3),
                "seed": run.seed,
                "environment": environment(run),
                "exit_status": self.exit_status,
                "summary": self.summary,
                "targets": [target.describe() for target in self.targets],
                "capabilities": [row.to_json() for row in self.rows],
            }
        )
        if run.recorded:
            document["recorded"] = {
                key: {"value": value, "source": RECORD_SOURCE}
                for key, value in run.recorded.items()
            }
        if run.budget_generations is not None:
            document["budget"] = self.budget()
        if not self.exit_rule.is_default:
            document["exit_rule"] = self.exit_rule.to_json()
        if self.fleet_restore:
            document["fleet_restore"] = list(self.fleet_restore)
        return document

    def budget(self) -> dict[str, Any]:
        """What `--budget-generations` allowed, what was sent, and the cells it left uncovered
        (every test of the cell skipped for the budget)."""
        uncovered = [
            {"capability": row.capability.id, "target": target_id}
            for row in self.rows
            for target_id, cell in row.cells.items()
            if cell.outcome is Outcome.SKIPPED and cell.reason.startswith(UNCOVERED_PREFIX)
        ]
        return {
            "generations_per_target": self.run.budget_generations,
            "generations_sent": {t.id: self.generations.get(t.id, 0) for t in self.targets},
            "uncovered": uncovered,
        }


def build_matrix(
    capabilities: Iterable[Capability],
    targets: Sequence[Target],
    records: Sequence[TestRecord],
    run: RunInfo,
) -> Matrix:
    grouped: dict[tuple[str, str], list[TestRecord]] = {}
    for record in records:
        for capability_id in record.capabilities:
            grouped.setdefault((capability_id, record.target_id), []).append(record)
    rows = []
    for capability in capabilities:
        cells = {}
        for target in targets:
            found = grouped.get((capability.id, target.id), [])
            cell = build_cell(capability, target, found)
            if not run.complete and not found:
                why = run.incomplete_reason or "the run was interrupted"
                cell.reason = f"{comparability.NOT_RUN_PREFIX}{why}"
                cell.not_run = True
            cells[target.id] = cell
        rows.append(Row(capability, cells))
    generations: Counter[str] = Counter()
    for record in records:
        generations[record.target_id] += record.generations
    return Matrix(run, list(targets), rows, dict(generations))


def _command(argv: list[str]) -> list[str]:
    if not argv:
        return []
    program = os.path.basename(argv[0])
    if program in ("__main__.py", "rl-conformance"):
        program = "rl-conformance"
    return [program, *argv[1:]]


def now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
