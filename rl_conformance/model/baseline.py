"""Comparing two matrices (`rl-conformance diff OLD.json NEW.json`): what regressed, what was
fixed, what appeared or disappeared, what coverage was lost and which failures now fail for
another reason. A nightly job keeps last night's `matrix.json` and fails on regressions (a cell
that passed and now fails or errors), and with `--fail-on-coverage-loss` also on coverage lost (a
cell that passed and is now skipped, unsupported, not advertised or gone).

Only what both runs judged is compared (`comparability`): a target either run did not reach is
not comparable, none of its cells compared; a cell a cut run never reached is not run, neither a
regression nor coverage lost, while the cells it did reach are compared as any other."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from .comparability import COMPARABLE, Comparability, not_run, of_matrix
from .exits import EXIT_FAILED, EXIT_OK, EXIT_UNREACHED

FAILING = ("fail", "error")
PASS = "pass"
REMOVED = "removed"
"""The new "outcome" of a passing cell whose capability, target or cell NEW no longer has."""


@dataclass(frozen=True)
class CellChange:
    capability: str
    target: str
    old: str
    new: str
    reason: str


@dataclass(frozen=True)
class CauseChange:
    """A cell failing in both matrices, for another reason: the failing checks or the fields
    their findings name are not the same."""

    capability: str
    target: str
    old_checks: list[str]
    new_checks: list[str]
    old_fields: list[str]
    new_fields: list[str]
    reason: str


@dataclass
class MatrixDiff:
    regressions: list[CellChange] = field(default_factory=list)
    """pass -> fail or error."""
    fixes: list[CellChange] = field(default_factory=list)
    """fail or error -> pass."""
    newly_failing: list[CellChange] = field(default_factory=list)
    """Another outcome (skipped, unsupported, ...) -> fail or error: worth a look, not a
    regression (the cell was never shown to pass)."""
    coverage_lost: list[CellChange] = field(default_factory=list)
    """pass -> skipped, unsupported, not-advertised or absent, or gone with its capability,
    target or cell (`removed`): what was shown to work is no longer shown, nothing failed."""
    changed_causes: list[CauseChange] = field(default_factory=list)
    """fail -> fail with other failing checks or other violated fields."""
    other_changes: list[CellChange] = field(default_factory=list)
    new_capabilities: list[str] = field(default_factory=list)
    removed_capabilities: list[str] = field(default_factory=list)
    new_targets: list[str] = field(default_factory=list)
    removed_targets: list[str] = field(default_factory=list)
    not_comparable: dict[str, str] = field(default_factory=dict)
    """Target -> why its cells are not compared: one of the runs never reached it
    (`targets[].unreached`), so its cells say nothing of the deployment."""
    not_run: list[tuple[str, str]] = field(default_factory=list)
    """(capability, target) of the cells a cut run (either) never reached: not compared."""
    old_comparability: Comparability = COMPARABLE
    new_comparability: Comparability = COMPARABLE
    """Whether each run may be compared, and why not (`comparability.of_matrix`)."""
    old_incomplete: bool = False
    new_incomplete: bool = False
    fail_on_coverage_loss: bool = False
    """`--fail-on-coverage-loss`: coverage lost sets the exit status as a regression does."""

    @property
    def comparable(self) -> bool:
        """Both runs completed and reached every target: every cell was compared."""
        return (
            self.old_comparability.comparable
            and self.new_comparability.comparable
            and not self.not_comparable
            and not self.not_run
        )

    @property
    def exit_status(self) -> int:
        """1 on a regression among the cells both runs judged (or coverage lost, when asked);
        else 3 (`exits.EXIT_UNREACHED`) when either run is not comparable; else 0."""
        if self.regressions or (self.fail_on_coverage_loss and self.coverage_lost):
            return EXIT_FAILED
        return EXIT_OK if self.comparable else EXIT_UNREACHED

    def causes(self) -> list[str]:
        """One line per run that is not comparable, naming its cause."""
        return [
            f"not comparable: {side} {found.sentence()}"
            for side, found in (("NEW", self.new_comparability), ("OLD", self.old_comparability))
            if not found.comparable
        ]

    def to_json(self) -> dict[str, Any]:
        def cells(items: list[CellChange] | list[CauseChange]) -> list[dict[str, Any]]:
            return [dict(item.__dict__) for item in items]

        return {
            "regressions": cells(self.regressions),
            "fixes": cells(self.fixes),
            "newly_failing": cells(self.newly_failing),
            "coverage_lost": cells(self.coverage_lost),
            "changed_causes": cells(self.changed_causes),
            "other_changes": cells(self.other_changes),
            "new_capabilities": self.new_capabilities,
            "removed_capabilities": self.removed_capabilities,
            "new_targets": self.new_targets,
            "removed_targets": self.removed_targets,
            "not_comparable": self.not_comparable,
            "not_run": [{"capability": c, "target": t} for c, t in self.not_run],
            "comparable": self.comparable,
            "old_not_comparable": self.old_comparability.to_json(),
            "new_not_comparable": self.new_comparability.to_json(),
            "old_incomplete": self.old_incomplete,
            "new_incomplete": self.new_incomplete,
            "fail_on_coverage_loss": self.fail_on_coverage_loss,
            "exit_status": self.exit_status,
        }


def load_matrix(path: Path) -> dict[str, Any]:
    """A `matrix.json`, or a `ConfigurationError` naming the file and what is wrong."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ConfigurationError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ConfigurationError(
            f"{path}: expected a matrix.json object, observed {type(document).__name__}"
        )
    for key, kind in (("capabilities", list), ("targets", list)):
        if not isinstance(document.get(key), kind):
            raise ConfigurationError(
                f"{path}: field {key!r}: expected a list (is this a matrix.json?), observed "
                f"{type(document.get(key)).__name__}"
            )
    return document


def column(document: dict[str, Any], target_id: str, shown_as: str) -> dict[str, Any]:
    """`document` reduced to one target's column, that target named `shown_as`: two columns of
    one release matrix (or of two runs) compared as two runs of one deployment."""
    targets = [target for target in document["targets"] if target.get("id") == target_id]
    if not targets:
        known = ", ".join(str(target.get("id")) for target in document["targets"])
        raise ConfigurationError(
            f"target {target_id!r}: expected one of the matrix's targets, observed none such "
            f"(targets: {known})"
        )
    rows = [
        {**row, "cells": {shown_as: row["cells"][target_id]}}
        for row in document["capabilities"]
        if target_id in (row.get("cells") or {})
    ]
    reduced = {
        key: value
        for key, value in document.items()
        if key not in ("comparable", "not_comparable")  # said of every column: judged again
    }
    return {
        **reduced,
        "targets": [{**targets[0], "id": shown_as}],
        "capabilities": rows,
    }


def _cells(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (row["id"], target): cell
        for row in document["capabilities"]
        for target, cell in (row.get("cells") or {}).items()
    }


def failure_cause(cell: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Why a cell fails: the ids of its failing checks (and of the checks its findings name),
    and the fields its findings name."""
    checks = {
        str(check.get("id"))
        for check in cell.get("checks") or ()
        if isinstance(check, dict) and check.get("outcome") == "fail"
    }
    fields = set()
    for finding in cell.get("evidence") or ():
        if not isinstance(finding, dict):
            continue
        if finding.get("check_id"):
            checks.add(str(finding["check_id"]))
        if finding.get("field"):
            fields.add(str(finding["field"]))
    return sorted(checks), sorted(fields)


def _not_run(
    before: dict[tuple[str, str], dict[str, Any]],
    after: dict[tuple[str, str], dict[str, Any]],
    key: tuple[str, str],
) -> bool:
    return any(key in cells and not_run(cells[key]) for cells in (before, after))


def _removal(key: tuple[str, str], new_rows: set[str], new_targets: set[str]) -> str:
    capability, target = key
    if capability not in new_rows:
        return "the capability is not in NEW"
    if target not in new_targets:
        return "the target is not in NEW"
    return "NEW has no cell for it"


def diff_matrices(
    old: dict[str, Any], new: dict[str, Any], fail_on_coverage_loss: bool = False
) -> MatrixDiff:
    result = MatrixDiff(
        old_comparability=of_matrix(old),
        new_comparability=of_matrix(new),
        old_incomplete=not old.get("complete", True),
        new_incomplete=not new.get("complete", True),
        fail_on_coverage_loss=fail_on_coverage_loss,
    )
    old_rows = {row["id"] for row in old["capabilities"]}
    new_rows = {row["id"] for row in new["capabilities"]}
    old_targets = {target["id"] for target in old["targets"]}
    new_targets = {target["id"] for target in new["targets"]}
    result.new_capabilities = sorted(new_rows - old_rows)
    result.removed_capabilities = sorted(old_rows - new_rows)
    result.new_targets = sorted(new_targets - old_targets)
    result.removed_targets = sorted(old_targets - new_targets)
    for side, document in (("OLD", old), ("NEW", new)):
        for target in document["targets"]:
            cause = target.get("unreached")
            if cause and target["id"] not in result.not_comparable:
                result.not_comparable[target["id"]] = f"{side} did not reach it: {cause}"
    before, after = _cells(old), _cells(new)
    for key in [key for key in before if key[1] in result.not_comparable]:
        before.pop(key)
        after.pop(key, None)
    for key in [key for key in after if key[1] in result.not_comparable]:
        after.pop(key)
    for key in sorted(key for key in before.keys() | after.keys() if _not_run(before, after, key)):
        result.not_run.append(key)
        before.pop(key, None)
        after.pop(key, None)
    for key in sorted(before.keys() - after.keys()):
        if before[key]["outcome"] == PASS:
            why = _removal(key, new_rows, new_targets)
            result.coverage_lost.append(CellChange(key[0], key[1], PASS, REMOVED, why))
    for key in sorted(before.keys() & after.keys()):
        was, now = before[key]["outcome"], after[key]["outcome"]
        reason = after[key].get("reason", "")
        if was == now:
            if was == "fail":
                _compare_causes(result, key, before[key], after[key])
            continue
        change = CellChange(key[0], key[1], was, now, reason)
        if was == PASS and now in FAILING:
            result.regressions.append(change)
        elif was in FAILING and now == PASS:
            result.fixes.append(change)
        elif now in FAILING and was not in FAILING:
            result.newly_failing.append(change)
        elif was == PASS:
            result.coverage_lost.append(change)
        else:
            result.other_changes.append(change)
    result.coverage_lost.sort(key=lambda change: (change.capability, change.target))
    return result


def _compare_causes(
    result: MatrixDiff, key: tuple[str, str], before: dict[str, Any], after: dict[str, Any]
) -> None:
    old_checks, old_fields = failure_cause(before)
    new_checks, new_fields = failure_cause(after)
    if (old_checks, old_fields) != (new_checks, new_fields):
        result.changed_causes.append(
            CauseChange(
                key[0],
                key[1],
                old_checks,
                new_checks,
                old_fields,
                new_fields,
                after.get("reason", ""),
            )
        )


def render_diff(result: MatrixDiff, markdown: bool = False) -> str:
    """Failures first; one line per cell."""
    lines: list[str] = []
    bullet = "- " if markdown else "  "
    code = "`" if markdown else ""

    def section(title: str, items: list[str]) -> None:
        if not items:
            return
        lines.append(f"### {title} ({len(items)})" if markdown else f"{title} ({len(items)}):")
        lines.extend(f"{bullet}{item}" for item in items)
        lines.append("")

    def where(capability: str, target: str) -> str:
        return f"{code}{capability}{code} on {code}{target}{code}: "

    def cell(change: CellChange) -> str:
        text = where(change.capability, change.target) + f"{change.old} -> {change.new}"
        return text + (f" ({change.reason})" if change.reason and change.new != PASS else "")

    def listed(items: list[str]) -> str:
        return "[" + ", ".join(f"{code}{item}{code}" for item in items) + "]"

    def cause(change: CauseChange) -> str:
        parts = []
        if change.old_checks != change.new_checks:
            parts.append(
                f"failing checks {listed(change.old_checks)} -> {listed(change.new_checks)}"
            )
        if change.old_fields != change.new_fields:
            parts.append(f"fields {listed(change.old_fields)} -> {listed(change.new_fields)}")
        text = where(change.capability, change.target) + "fail -> fail, " + "; ".join(parts)
        return text + (f" ({change.reason})" if change.reason else "")

    head = (
        f"{len(result.regressions)} regression(s), {len(result.fixes)} fix(es), "
        f"{len(result.newly_failing)} newly failing, {len(result.coverage_lost)} coverage lost, "
        f"{len(result.changed_causes)} changed failure cause(s), "
        f"{len(result.other_changes)} other change(s)"
    )
    causes = result.causes()
    if markdown:
        lines += [*[f"**{line}**" for line in causes], *([""] if causes else [])]
        lines += [f"## Matrix diff: {head}", ""]
    else:
        lines += [*causes, head]
    if result.not_run:
        lines.append(
            f"{len(result.not_run)} cell(s) not run: a cut run never reached them (not compared; "
            "the cells it reached are)"
        )
    lines.append("")
    said = " ".join(causes)
    section(  # each target not reached, unless the cause line above already named it
        "Not comparable",
        [
            f"{code}{target}{code}: {why}"
            for target, why in sorted(result.not_comparable.items())
            if " ".join(why.split(": ", 1)[-1].split()) not in said
        ],
    )
    section("Regressions", [cell(c) for c in result.regressions])
    section("Newly failing (never passed before)", [cell(c) for c in result.newly_failing])
    lost = "Coverage lost: passed before, no longer shown to pass"
    if result.fail_on_coverage_loss:
        lost += " (fails the diff)"
    section(lost, [cell(c) for c in result.coverage_lost])
    section(
        "Changed failure causes: failing before and now, for another reason",
        [cause(c) for c in result.changed_causes],
    )
    section("Fixes", [cell(c) for c in result.fixes])
    section("Other changes", [cell(c) for c in result.other_changes])
    section("New capabilities", result.new_capabilities)
    section("Removed capabilities", result.removed_capabilities)
    section("New targets", result.new_targets)
    section("Removed targets", result.removed_targets)
    return "\n".join(lines).rstrip() + "\n"
