"""What a run prints at its end: the grid when it fits the width (the wide table is in
matrix.md and matrix.html), a banner for each target the run never reached, the failing cells,
the cell counts, the skipped cells grouped by what would cover them, what the exit status means
and where the reports are. Built from `matrix.json`'s document, so a matrix rebuilt later prints
the same.

At a terminal a failing cell's reason is cut to one line (the reports hold it whole); anywhere
else (a CI log, a file) every reason is printed whole, wrapped, since the log may be all a reader
has. On GitHub Actions each failing cell is also an annotation (`annotation_lines`)."""

from __future__ import annotations

import os
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..model import exits
from ..wire.exchange import shorten
from . import differences

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
FLAG = re.compile(r"--[a-z][a-z0-9-]+")
FIX_CLAUSE = re.compile(r"\b(?:give|use|add|pass|set|run)\b[^.;()]*--[a-z][a-z0-9-]+[^.;()]*")


def summary_lines(
    matrix: dict[str, Any],
    *,
    report_dir: Path,
    width: int = 100,
    bundle_sha256: str | None = None,
    terminal: bool = True,
    annotate: bool = False,
) -> list[str]:
    """`terminal`: a person reads it at a terminal (reasons cut to a line); else every reason
    whole. `annotate`: GitHub Actions workflow commands, one per failing cell, at the end."""
    width = max(60, width)
    lines = [
        line
        for warning in matrix.get("warnings", [])
        for line in _wrapped(f"!!! {warning}", width, indent="")
    ]
    lines += grid_lines(matrix, width)
    lines += unreached_lines(matrix, width)
    lines += failure_lines(matrix, width, whole=not terminal)
    for line in differences.console_lines(matrix):
        lines += _wrapped(line, width, indent="")
    lines.append(counts_line(matrix))
    lines += skip_lines(matrix, width, every_group=not terminal)
    status = matrix["exit_status"]
    lines += _wrapped(f"exit {status}: {exits.meaning(status)}", width, indent="")
    lines.append(f"reports: {report_dir.resolve() / 'matrix.html'}")
    lines.append("  (also matrix.md, matrix.json, junit.xml; one directory per run)")
    if bundle_sha256:
        lines.append(f"bundle.json sha256 {bundle_sha256}")
        lines.append("  (keep it: rl-conformance verify-bundle DIR --sha256 <that digest>)")
    if annotate:
        lines += annotation_lines(matrix)
    return lines


def grid_lines(matrix: dict[str, Any], width: int) -> list[str]:
    """One line per capability, one short outcome per target; `!` marks an observation that
    contradicts the documented support, `~` a release difference."""
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
            text += differences.MARK if cell.get("release_differences") else ""
            cells.append(f"  {text:<{column}}")
        lines.append((f"{row['id']:<{name}}  {row['level']:<6}" + "".join(cells)).rstrip())
    if any(cell.get("contradicts_documentation") for row in rows for cell in row["cells"].values()):
        lines.append("! = the observation contradicts the spec's documented support")
    if differences.flagged(matrix):
        lines.append(differences.LEGEND)
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


def failure_lines(matrix: dict[str, Any], width: int, *, whole: bool = False) -> list[str]:
    """A line per failing cell of a reached target (at most `FAILURES_SHOWN`), its reason cut
    to the width; `whole`: every failing cell, its reason whole, wrapped."""
    failing, not_reached = _failing(matrix)
    lines = []
    for capability_id, target, cell in failing if whole else failing[:FAILURES_SHOWN]:
        head = f"{cell['outcome'].upper()} {capability_id} on {target}: "
        if whole:
            lines += _wrapped(head + " ".join(cell["reason"].split()), width, indent="")
        else:
            lines.append(head + shorten(cell["reason"], max(20, width - len(head))))
    if len(failing) > FAILURES_SHOWN and not whole:
        lines.append(f"... and {len(failing) - FAILURES_SHOWN} more in matrix.md")
    if not_reached:
        lines.append(f"{len(not_reached)} cell(s) not reached before the run stopped (error)")
    return lines


def _failing(
    matrix: dict[str, Any],
) -> tuple[list[tuple[str, str, dict[str, Any]]], list[tuple[str, str, dict[str, Any]]]]:
    """The fail and error cells of the targets the run reached, and those it never reached
    before it stopped."""
    unreached = {target["id"] for target in matrix["targets"] if target.get("unreached")}
    failing = [
        (row["id"], target, cell)
        for row in matrix["capabilities"]
        for target, cell in row["cells"].items()
        if cell["outcome"] in ("fail", "error") and target not in unreached
    ]
    not_reached = [item for item in failing if item[2]["reason"].startswith(NOT_REACHED)]
    return [item for item in failing if item not in not_reached], not_reached


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


def skip_lines(matrix: dict[str, Any], width: int, *, every_group: bool = False) -> list[str]:
    """Skipped cells grouped by what would cover them (the flag their reason names, else the
    reason whole); `every_group`: all of them, not only the largest `SKIP_GROUPS_SHOWN`."""
    groups: Counter[str] = Counter(
        cover_of(cell["reason"])
        for row in matrix["capabilities"]
        for cell in row["cells"].values()
        if cell["outcome"] == "skipped"
    )
    if not groups:
        return []
    shown = len(groups) if every_group else SKIP_GROUPS_SHOWN
    lines = ["skipped, by what would cover them:"]
    for cover, count in groups.most_common(shown):
        wrapped = _wrapped(cover, width - 6, indent="")
        lines.append(f"  {count:>3} {wrapped[0]}")
        lines += [f"      {line.strip()}" for line in wrapped[1:]]
    rest = sum(groups.values()) - sum(count for _, count in groups.most_common(shown))
    if rest:
        lines.append(f"  {rest:>3} more, for other reasons (matrix.md)")
    return lines


def annotation_lines(matrix: dict[str, Any]) -> list[str]:
    """A GitHub Actions error annotation per failing cell of a reached target, and one per
    target the run never reached (its cause, once): `::error title=...::reason`, with the
    suite file of the cell's test when the working directory holds it (a checkout)."""
    failing, _ = _failing(matrix)
    lines = []
    for target in matrix["targets"]:
        if target.get("unreached"):
            title = f"NOT REACHED {target['id']}"
            lines.append(_annotation(title, " ".join(target["unreached"].split()), None))
    for capability_id, target, cell in failing:
        title = f"{cell['outcome'].upper()} {capability_id} on {target}"
        lines.append(_annotation(title, " ".join(cell["reason"].split()), _suite_file(cell)))
    return lines


def in_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _annotation(title: str, message: str, file: str | None) -> str:
    """A workflow command, escaped as GitHub's runner reads it."""
    where = f"file={_escaped(file, property=True)}," if file else ""
    return f"::error {where}title={_escaped(title, property=True)}::{_escaped(message)}"


def _escaped(text: str, *, property: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if property:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def _suite_file(cell: dict[str, Any]) -> str | None:
    for test in cell.get("tests", []):
        path = Path("suites") / str(test.get("nodeid", "")).split("::", 1)[0]
        if path.suffix == ".py" and path.is_file():
            return path.as_posix()
    return None


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
    """What would cover a skipped cell, from its reason: the parenthesised advice that names a
    flag, else a clause that says to give or use a flag, else the reason's head when it names
    one, else the clause naming one, else the reason whole (never its head alone: a reason
    that names no flag is read in full)."""
    found = COVER.search(reason)
    if found:
        return found.group(1).strip()
    fix = FIX_CLAUSE.search(reason)
    head = reason.split(": ", 1)[0]
    if fix:  # with what is missing, when the reason opens with it
        said = fix.group(0).strip()
        opens = fix.start() == len(head) + 2
        return " ".join(f"{head}: {said}".split()) if opens else said
    if FLAG.search(head):  # "judged only on a deployment the suite launches (--fake NAME)"
        return " ".join(head.split())
    clause = FLAG_CLAUSE.search(reason)
    if clause:
        return clause.group(0).strip()
    return " ".join(reason.split()) or "no reason given"


def _wrapped(text: str, width: int, *, indent: str) -> list[str]:
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=indent or "  ",
        break_long_words=False,
    )
