"""Markdown rendering of the matrix: one table, then the evidence of every non-passing cell."""

from __future__ import annotations

from typing import Any

SYMBOL = {
    "pass": "pass",
    "fail": "**FAIL**",
    "unsupported": "unsupported",
    "not-advertised": "not-advertised",
    "skipped": "skipped",
    "error": "**ERROR**",
}


def cell_text(cell: dict[str, Any]) -> str:
    text = SYMBOL.get(cell["outcome"], cell["outcome"])
    if cell.get("contradicts_documentation"):
        text += " (!doc)"
    return text


def render_markdown(matrix: dict[str, Any]) -> str:
    targets = [target["id"] for target in matrix["targets"]]
    lines = [f"# Conformance matrix ({matrix['suite']['name']} {matrix['suite']['version']})", ""]
    if not matrix["complete"]:
        why = matrix.get("incomplete_reason") or "interrupted before every test ran"
        lines += [f"**Incomplete run: {why}.**", ""]
    summary = ", ".join(f"{count} {name}" for name, count in matrix["summary"].items() if count)
    lines += [
        f"Started {matrix['started_at']}, {matrix['duration_s']} s, seed {matrix['seed']}. "
        f"Cells: {summary}.",
        "",
    ]
    lines.append("| capability | level | " + " | ".join(targets) + " |")
    lines.append("|---|---|" + "---|" * len(targets))
    for row in matrix["capabilities"]:
        cells = [cell_text(row["cells"][target]) for target in targets]
        lines.append(
            f"| `{row['id']}` {row['title']} | {row['level']} | " + " | ".join(cells) + " |"
        )
    lines += ["", "(!doc) = the observation contradicts the spec's documented support.", ""]
    details = []
    for row in matrix["capabilities"]:
        for target in targets:
            cell = row["cells"][target]
            if cell["outcome"] in ("pass",):
                continue
            details.append(f"### `{row['id']}` on {target}: {cell['outcome']}")
            details.append("")
            details.append(f"{cell['reason']}")
            for item in cell["evidence"][:3]:
                details.append("")
                details.append(f"- `{item['check_id']}`: {item['message']}")
                if item.get("field"):
                    details.append(
                        f"  - field: `{item['field']}`; expected `{_short(item['expected'])}`"
                        f", observed `{_short(item['observed'])}`"
                    )
                if item.get("reproducer"):
                    details.append(f"  - reproduce: `{item['reproducer']}`")
            details.append("")
    if details:
        lines += ["## Cells that did not pass", "", *details]
    return "\n".join(lines) + "\n"


def _short(value: Any, limit: int = 160) -> str:
    text = str(value).replace("`", "'").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
