"""Comparing two matrices (`rl-conformance diff OLD.json NEW.json`): what regressed, what was
fixed, what appeared or disappeared. A nightly job keeps last night's `matrix.json` and fails
only on regressions: a cell that passed and now fails or errors."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigurationError

FAILING = ("fail", "error")


@dataclass(frozen=True)
class CellChange:
    capability: str
    target: str
    old: str
    new: str
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
    other_changes: list[CellChange] = field(default_factory=list)
    new_capabilities: list[str] = field(default_factory=list)
    removed_capabilities: list[str] = field(default_factory=list)
    new_targets: list[str] = field(default_factory=list)
    removed_targets: list[str] = field(default_factory=list)
    old_incomplete: bool = False
    new_incomplete: bool = False

    @property
    def exit_status(self) -> int:
        return 1 if self.regressions else 0

    def to_json(self) -> dict[str, Any]:
        def cells(items: list[CellChange]) -> list[dict[str, str]]:
            return [item.__dict__ for item in items]

        return {
            "regressions": cells(self.regressions),
            "fixes": cells(self.fixes),
            "newly_failing": cells(self.newly_failing),
            "other_changes": cells(self.other_changes),
            "new_capabilities": self.new_capabilities,
            "removed_capabilities": self.removed_capabilities,
            "new_targets": self.new_targets,
            "removed_targets": self.removed_targets,
            "old_incomplete": self.old_incomplete,
            "new_incomplete": self.new_incomplete,
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


def _cells(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (row["id"], target): cell
        for row in document["capabilities"]
        for target, cell in (row.get("cells") or {}).items()
    }


def diff_matrices(old: dict[str, Any], new: dict[str, Any]) -> MatrixDiff:
    result = MatrixDiff(
        old_incomplete=not old.get("complete", True), new_incomplete=not new.get("complete", True)
    )
    old_rows = {row["id"] for row in old["capabilities"]}
    new_rows = {row["id"] for row in new["capabilities"]}
    old_targets = {target["id"] for target in old["targets"]}
    new_targets = {target["id"] for target in new["targets"]}
    result.new_capabilities = sorted(new_rows - old_rows)
    result.removed_capabilities = sorted(old_rows - new_rows)
    result.new_targets = sorted(new_targets - old_targets)
    result.removed_targets = sorted(old_targets - new_targets)
    before, after = _cells(old), _cells(new)
    for key in sorted(before.keys() & after.keys()):
        was, now = before[key]["outcome"], after[key]["outcome"]
        if was == now:
            continue
        change = CellChange(key[0], key[1], was, now, after[key].get("reason", ""))
        if was == "pass" and now in FAILING:
            result.regressions.append(change)
        elif was in FAILING and now == "pass":
            result.fixes.append(change)
        elif now in FAILING and was not in FAILING:
            result.newly_failing.append(change)
        else:
            result.other_changes.append(change)
    return result


def render_diff(result: MatrixDiff, markdown: bool = False) -> str:
    """Failures first; one line per cell."""
    lines: list[str] = []
    bullet = "- " if markdown else "  "

    def section(title: str, items: list[str]) -> None:
        if not items:
            return
        lines.append(f"### {title} ({len(items)})" if markdown else f"{title} ({len(items)}):")
        lines.extend(f"{bullet}{item}" for item in items)
        lines.append("")

    def cell(change: CellChange) -> str:
        code = "`" if markdown else ""
        text = f"{code}{change.capability}{code} on {code}{change.target}{code}: "
        text += f"{change.old} -> {change.new}"
        return text + (f" ({change.reason})" if change.reason and change.new != "pass" else "")

    head = (
        f"{len(result.regressions)} regression(s), {len(result.fixes)} fix(es), "
        f"{len(result.newly_failing)} newly failing, {len(result.other_changes)} other change(s)"
    )
    lines += [f"## Matrix diff: {head}" if markdown else head, ""]
    if result.old_incomplete or result.new_incomplete:
        which = " and ".join(
            name
            for name, flag in (("OLD", result.old_incomplete), ("NEW", result.new_incomplete))
            if flag
        )
        lines += [f"note: {which} is an incomplete run; cells it did not reach are errors", ""]
    section("Regressions", [cell(c) for c in result.regressions])
    section("Newly failing (never passed before)", [cell(c) for c in result.newly_failing])
    section("Fixes", [cell(c) for c in result.fixes])
    section("Other changes", [cell(c) for c in result.other_changes])
    section("New capabilities", result.new_capabilities)
    section("Removed capabilities", result.removed_capabilities)
    section("New targets", result.new_targets)
    section("Removed targets", result.removed_targets)
    return "\n".join(lines).rstrip() + "\n"
