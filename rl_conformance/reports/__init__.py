"""Report writers: the same matrix as JSON, Markdown, JUnit XML and HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .html import render_html
from .junit import render_junit
from .markdown import render_markdown

FILES = {
    "matrix.json": lambda matrix: json.dumps(matrix, indent=2, sort_keys=False) + "\n",
    "matrix.md": render_markdown,
    "junit.xml": render_junit,
    "matrix.html": render_html,
}


def write_reports(matrix: dict[str, Any], directory: Path) -> list[Path]:
    """Write every report; the JSON first, so an error in a renderer never loses the results."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, render in FILES.items():
        path = directory / name
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_text(render(matrix), encoding="utf-8")
        temporary.replace(path)
        written.append(path)
    return written


__all__ = ["render_html", "render_junit", "render_markdown", "write_reports"]
