"""A single self-contained HTML page: the matrix with colour-coded cells and expandable evidence."""

from __future__ import annotations

from html import escape
from typing import Any

COLOURS = {
    "pass": "#d7f5dd",
    "fail": "#ffd6d6",
    "error": "#ffb3b3",
    "unsupported": "#eeeeee",
    "not-advertised": "#f3f0d7",
    "skipped": "#f7f7f7",
}

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: .3rem .6rem; vertical-align: top; text-align: left; }
td.cell { min-width: 8rem; }
details pre { white-space: pre-wrap; max-width: 40rem; font-size: .8rem; }
.banner { background: #ffe08a; padding: .5rem 1rem; }
"""


def render_html(matrix: dict[str, Any]) -> str:
    targets = matrix["targets"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{escape(matrix['suite']['name'])} matrix</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Conformance matrix</h1><p>{escape(matrix['suite']['name'])} "
        f"{escape(matrix['suite']['version'])}, started {escape(matrix['started_at'])}, "
        f"{matrix['duration_s']} s, seed {escape(str(matrix['seed']))}</p>",
    ]
    if not matrix["complete"]:
        parts.append("<p class='banner'>Incomplete run: interrupted before every test ran.</p>")
    parts.append("<table><tr><th>capability</th><th>level</th>")
    for target in targets:
        parts.append(
            f"<th>{escape(target['id'])}<br><small>{escape(target['backend'])}, "
            f"{escape(target['kind'])}</small></th>"
        )
    parts.append("</tr>")
    for row in matrix["capabilities"]:
        parts.append(
            f"<tr><td><code>{escape(row['id'])}</code><br>{escape(row['title'])}"
            f"<br><small>{escape(row['spec']['section'])}</small></td>"
            f"<td>{escape(row['level'])}</td>"
        )
        for target in targets:
            parts.append(_cell(row["cells"][target["id"]]))
        parts.append("</tr>")
    parts.append("</table></body></html>\n")
    return "".join(parts)


def _cell(cell: dict[str, Any]) -> str:
    colour = COLOURS.get(cell["outcome"], "#ffffff")
    label = escape(cell["outcome"]) + (
        " (contradicts docs)" if cell["contradicts_documentation"] else ""
    )
    body = [f"<td class='cell' style='background:{colour}'><b>{label}</b>"]
    details = [escape(cell["reason"])]
    for item in cell["evidence"][:5]:
        details.append(f"{escape(item['check_id'])}: {escape(item['message'])}")
        if item.get("reproducer"):
            details.append(escape(item["reproducer"]))
    body.append(
        f"<details><summary>details</summary><pre>{'<br>'.join(details)}</pre></details></td>"
    )
    return "".join(body)
