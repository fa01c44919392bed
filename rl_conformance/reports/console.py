"""What a run prints at its end, for a person at a terminal: the grid when it fits the width
(the wide table is in matrix.md and matrix.html), a banner for each target the run never
reached, the failing cells, the cell counts, the skipped cells grouped by what would cover them,
what the exit status means and where the reports are. Built from `matrix.json`'s document, so a
matrix rebuilt later prints the same."""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..model import exits
from ..wire.exchange import shorten

FAILURES_SHOWN = 20
SKIP_GROUPS_SHOWN = 8
SHORT = {
    "pass": "pass",
    "fail": "FAIL",
    "error": "ERROR",
    "skipped": "skip",
    "unsupported": "unsup",
    "not-advertised": "n/adv",
}
COUNTED = ("pass", "fail", "error", "unsupported", "not-advertised", "skipped")
ALWAYS_COUNTED = ("pass", "fail", "error")
NOT_REACHED = "not reached:"
"""How the reason of a cell a stopped run never reached starts (`matrix.build_matrix`)."""
COVER = re.compile(r"\(((?:use|give|add|pass|set|run|with)\b[^()]*?--[a-z][^()]*)\)")
FLAG_CLAUSE = re.compile(r"[^.;()]*--[a-z][a-z0-9-]+[^.;()]*")


def summary_lines(
    matrix: dict[str, Any],
    *,
    report_dir: Path,
    width: int = 100,
    bundle_sha256: str | None = None,
) -> list[str]:
    width = max(60, width)
    lines = [
        line
        for warning in matrix.get("warnings", [])
        for line in _wrapped(f"!!! {warning}", width, indent="")
    ]
    lines += grid_lines(matrix, width)
    lines += unreached_lines(matrix, width)
    lines += failure_lines(matrix, width)
    lines.append(counts_line(matrix))
    lines += skip_lines(matrix, width)
    status = matrix["exit_status"]
    lines += _wrapped(f"exit {status}: {exits.meaning(status)}", width, indent="")
    lines.append(f"reports: {report_dir.resolve() / 'matrix.html'}")
    lines.append("  (also matrix.md, matrix.json, junit.xml; one directory per run)")
    if bundle_sha256:
        lines.append(f"bundle.json sha256 {bundle_sha256}")
        lines.append("  (keep it: rl-conformance verify-bundle DIR --sha256 <that digest>)")
    return lines


def grid_lines(matrix: dict[str, Any], width: int) -> list[str]:
    """One line per capability, one short outcome per target; `!` marks an observation that
    contradicts the documented support."""
    targets = [target["id"] for target in matrix["targets"]]
    rows = matrix["capabilities"]
    if not rows or not targets:
        return []
    name = max(len(row["id"]) for row in rows)
    columns = [max(len(target), 6) for target in targets]
    if name + 8 + sum(column + 2 for column in columns) > width:
        return [
            f"{len(rows)} capabilities x {len(targets)} targets: wider than the terminal; "
            "the grid is in matrix.md and matrix.html"
        ]
    lines = [
        f"{'capability':<{name}}  {'level':<6}"
        + "".join(f"  {target:<{column}}" for target, column in zip(targets, columns, strict=True))
    ]
    for row in rows:
        cells = []
        for target, column in zip(targets, columns, strict=True):
            cell = row["cells"][target]
            text = SHORT.get(cell["outcome"], cell["outcome"])
            text += "!" if cell.get("contradicts_documentation") else ""
            cells.append(f"  {text:<{column}}")
        lines.append((f"{row['id']:<{name}}  {row['level']:<6}" + "".join(cells)).rstrip())
    if any(cell.get("contradicts_documentation") for row in rows for cell in row["cells"].values()):
        lines.append("! = the observation contradicts the spec's documented support")
    return lines


def unreached_lines(matrix: dict[str, Any], width: int) -> list[str]:
    """A banner per target the run never reached: its cause once, not once per cell."""
    lines = []
    for target in matrix["targets"]:
        cause = target.get("unreached")
        if not cause:
            continue
        errors = sum(
            1 for row in matrix["capabilities"] if row["cells"][target["id"]]["outcome"] == "error"
        )
        lines.append("=" * min(width, 72))
        lines.append(f"NOT REACHED {target['id']}: its {errors} error cell(s) all come from:")
        lines += _wrapped(" ".join(cause.split()), width, indent="  ")
        lines.append("=" * min(width, 72))
    return lines


def failure_lines(matrix: dict[str, Any], width: int) -> list[str]:
    unreached = {target["id"] for target in matrix["targets"] if target.get("unreached")}
    failing = [
        (row["id"], target, cell)
        for row in matrix["capabilities"]
        for target, cell in row["cells"].items()
        if cell["outcome"] in ("fail", "error") and target not in unreached
    ]
    not_reached = [item for item in failing if item[2]["reason"].startswith(NOT_REACHED)]
    failing = [item for item in failing if not item[2]["reason"].startswith(NOT_REACHED)]
    lines = []
    for capability_id, target, cell in failing[:FAILURES_SHOWN]:
        head = f"{cell['outcome'].upper()} {capability_id} on {target}: "
        lines.append(head + shorten(cell["reason"], max(20, width - len(head))))
    if len(failing) > FAILURES_SHOWN:
        lines.append(f"... and {len(failing) - FAILURES_SHOWN} more in matrix.md")
    if not_reached:
        lines.append(f"{len(not_reached)} cell(s) not reached before the run stopped (error)")
    return lines


def counts_line(matrix: dict[str, Any]) -> str:
    summary = matrix["summary"]
    shown = ", ".join(
        f"{summary.get(outcome, 0)} {outcome}"
        for outcome in COUNTED
        if outcome in ALWAYS_COUNTED or summary.get(outcome, 0)
    )
    rows, targets = len(matrix["capabilities"]), len(matrix["targets"])
    incomplete = "" if matrix["complete"] else ", incomplete"
    return f"cells: {shown} ({rows} x {targets}{incomplete})"


def skip_lines(matrix: dict[str, Any], width: int) -> list[str]:
    """Skipped cells grouped by what would cover them (the flag their reason names)."""
    groups: Counter[str] = Counter(
        cover_of(cell["reason"])
        for row in matrix["capabilities"]
        for cell in row["cells"].values()
        if cell["outcome"] == "skipped"
    )
    if not groups:
        return []
    lines = ["skipped, by what would cover them:"]
    for cover, count in groups.most_common(SKIP_GROUPS_SHOWN):
        wrapped = _wrapped(cover, width - 6, indent="")
        lines.append(f"  {count:>3} {wrapped[0]}")
        lines += [f"      {line.strip()}" for line in wrapped[1:]]
    rest = sum(groups.values()) - sum(count for _, count in groups.most_common(SKIP_GROUPS_SHOWN))
    if rest:
        lines.append(f"  {rest:>3} more, for other reasons (matrix.md)")
    return lines


def crash_probe_lines(
    probes: Sequence[tuple[str, str]],
    targets: Sequence[str],
    *,
    flag: str,
    left_out: bool,
    width: int = 100,
) -> list[str]:
    """What a run says before its first test of the probes that may end the worker they are
    sent to (`probes`: the capability each judges, and why), in the order they run: that they
    run after every other test of `targets`, and which flag leaves them out; or that the flag
    left them out. Nothing when there are none."""
    if not probes:
        return []
    count = f"{len(probes)} probe{'s' if len(probes) > 1 else ''}"
    if left_out:
        head = f"left out by {flag}: {count} that may end a worker, each skipped naming the flag"
    else:
        many = len(probes) > 1
        head = (
            f"{count} may end the worker {'they are' if many else 'it is'} sent to: run after "
            f"every other test of {', '.join(targets)} ({flag} leaves {'them' if many else 'it'} "
            "out)"
        )
    lines = textwrap.wrap(head, width=width, subsequent_indent="  ", break_on_hyphens=False)
    for capability, reason in probes:
        lines += textwrap.wrap(
            f"- {capability}: {reason}",
            width=width,
            initial_indent="  ",
            subsequent_indent="    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return lines


def cover_of(reason: str) -> str:
    """The part of a skip reason that says what would cover it: the parenthesised advice that
    names a flag, else the clause naming one, else the reason's head (what was missing)."""
    found = COVER.search(reason)
    if found:
        return found.group(1).strip()
    clause = FLAG_CLAUSE.search(reason)
    if clause:
        return clause.group(0).strip()
    return reason.split(":", 1)[0].strip() or "no reason given"


def _wrapped(text: str, width: int, *, indent: str) -> list[str]:
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=indent or "  ",
        break_long_words=False,
    )
