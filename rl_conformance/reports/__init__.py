"""Report writers: the same matrix as JSON, Markdown, JUnit XML and HTML."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from ..redaction import redact, write_text
from .html import render_html
from .junit import render_junit
from .markdown import render_markdown

FILES = {
    "matrix.json": lambda matrix: json.dumps(matrix, indent=2, sort_keys=False) + "\n",
    "matrix.md": render_markdown,
    "junit.xml": render_junit,
    "matrix.html": render_html,
}


WIRE_DIR = "wire"
EXCERPT_CHARS = 600


def externalise_wire_logs(matrix: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Save each failure's (and release difference's) wire log as `wire/<digest>.json` next to
    the matrix (one file per distinct exchange) and return a copy of the matrix that names the
    file (`wire_log`) and keeps a short excerpt (`wire_excerpt`) in place of the log."""
    document = copy.deepcopy(matrix)
    for row in document.get("capabilities", []):
        for cell in row.get("cells", {}).values():
            for item in [*cell.get("evidence", []), *cell.get("release_differences", [])]:
                wire = item.pop("wire", None)
                if wire is None:
                    continue
                text = redact(json.dumps(wire, indent=2, sort_keys=True, default=str) + "\n")
                name = f"{WIRE_DIR}/{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
                path = directory / name
                if not path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    write_text(path, text)
                item["wire_log"] = name
                item["wire_excerpt"] = wire_excerpt(wire)
    return document


def wire_excerpt(wire: dict[str, Any]) -> str:
    if "sequence" in wire:
        return sequence_excerpt(wire)
    request = wire.get("request", {})
    lines = [f"{request.get('method')} {request.get('url')}"]
    if request.get("body"):
        lines.append(str(request["body"])[:200])
    status = wire.get("status")
    lines.append(
        f"-> HTTP {status}" if status is not None else f"-> no response ({wire.get('error')})"
    )
    if "events" in wire:
        lines += [f"data: {event.get('data')}" for event in wire["events"][:6]]
        total = wire.get("event_count", len(wire["events"]))  # an elided stream had more
        if total > 6:
            lines.append(f"... {total - 6} more events")
    elif wire.get("body"):
        lines.append(str(wire["body"]))
    text = "\n".join(lines)
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + " ..."


def sequence_excerpt(wire: dict[str, Any]) -> str:
    """A sequence's wire log in short: each request and its status, in order. Where they do not
    all fit, the last request (where the failure shows) is kept, then the control calls to the
    workers (`/engine/...`: the steps a refresh failure follows from), then the latest others;
    each gap says how many requests it hides."""
    steps = wire.get("sequence") or []
    head = f"{wire.get('requests', len(steps))} request(s) of the test, in order"
    lines = []
    for step in steps:
        request = step.get("request", {})
        status = step.get("status")
        answer = f"HTTP {status}" if status is not None else f"no response ({step.get('error')})"
        lines.append(f"{request.get('method')} {request.get('url')} -> {answer}")
    if wire.get("exchanges_elided"):
        head += f"\n({wire['exchanges_elided']} exchanges elided)"
    latest = list(reversed(range(len(lines))))
    preferred = latest[:1] + [i for i in latest[1:] if "/engine/" in lines[i]]
    preferred += [i for i in latest[1:] if i not in preferred]
    kept: set[int] = set()
    used = len(head)
    for index in preferred:
        if kept and used + len(lines[index]) + 40 > EXCERPT_CHARS:
            break
        kept.add(index)
        used += len(lines[index]) + 1
    shown, hidden = [head], 0
    for index, line in enumerate(lines):
        if index not in kept:
            hidden += 1
            continue
        if hidden:
            shown.append(f"... {hidden} {'earlier' if len(shown) == 1 else 'more'}")
            hidden = 0
        shown.append(line)
    return "\n".join(shown)[: EXCERPT_CHARS + 80]


def write_reports(matrix: dict[str, Any], directory: Path) -> list[Path]:
    """Write every report; the JSON first, so an error in a renderer never loses the results.
    Failures' wire logs go to `wire/`, named from the evidence."""
    directory.mkdir(parents=True, exist_ok=True)
    matrix = externalise_wire_logs(matrix, directory)
    written = []
    for name, render in FILES.items():
        path = directory / name
        temporary = path.with_suffix(path.suffix + ".tmp")
        write_text(temporary, render(matrix))
        temporary.replace(path)
        written.append(path)
    return written


__all__ = [
    "bundle",
    "evidence",
    "record_rules",
    "render_html",
    "render_junit",
    "render_markdown",
    "validation",
    "validation_gates",
    "write_reports",
]
