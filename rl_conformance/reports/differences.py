"""Release differences in the reports: a behaviour no normative sentence of the spec fixes, seen
on a deployment and not on a recorded release (`matrix.json`'s `release_differences` on a cell).

Such a behaviour is not a failure: nothing in the contract says which release is right. It is
flagged wherever the cell is shown (`~` in the console, `(~release)` in Markdown and HTML) and
listed with its evidence and with where its expectation comes from (its check's spec text, which
names the releases that do what), so that a reader sees it without it failing the run."""

from __future__ import annotations

from typing import Any

from ..checks.base import REGISTRY

MARK = "~"
LABEL = "(~release)"
LEGEND = "~ = a release difference: behaviour no spec sentence fixes (listed with its evidence)"
HEADING = "## Release differences"


def flagged(matrix: dict[str, Any]) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    """Each (row, target id, cell) whose cell carries release differences, in matrix order."""
    return [
        (row, target_id, cell)
        for row in matrix.get("capabilities", [])
        for target_id, cell in row["cells"].items()
        if cell.get("release_differences")
    ]


def source_of(check_id: str) -> str:
    """Where the check's expectation comes from (no spec sentence: the releases it names)."""
    found = REGISTRY.get(check_id)
    return found.spec.spec if found is not None else "no spec sentence fixes this behaviour"


def markdown_lines(matrix: dict[str, Any]) -> list[str]:
    """The Markdown section listing every release difference with its evidence."""
    found = flagged(matrix)
    if not found:
        return []
    lines = [
        f"{HEADING} ({len(found)})",
        "",
        "Not failures: no normative sentence of the spec fixes these behaviours, and a recorded "
        "release behaves otherwise.",
        "",
    ]
    for row, target_id, cell in found:
        lines += [f"### `{row['id']}` on `{target_id}` (outcome {cell['outcome']})", ""]
        for item in cell["release_differences"]:
            lines.append(f"- check `{item['check_id']}`: {_short(item['message'], 400)}")
            lines.append(
                f"  - field `{item.get('field') or '-'}`: recorded `{_short(item['expected'])}`, "
                f"observed `{_short(item['observed'])}`"
            )
            lines.append(f"  - why not a failure: {_short(source_of(item['check_id']), 1200)}")
            if item.get("reproducer"):
                lines.append(f"  - reproduce: `{_short(item['reproducer'], 2000)}`")
            if item.get("wire_log"):
                lines.append(f"  - wire log: [{item['wire_log']}]({item['wire_log']})")
        lines.append("")
    return lines


def console_lines(matrix: dict[str, Any]) -> list[str]:
    """One line per flagged cell for the console, after the grid."""
    return [
        f"RELEASE DIFFERENCE {row['id']} on {target_id}: "
        + "; ".join(dict.fromkeys(item["message"] for item in cell["release_differences"]))
        for row, target_id, cell in flagged(matrix)
    ]


def _short(value: Any, limit: int = 160) -> str:
    text = str(value).replace("`", "'").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
