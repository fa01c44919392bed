"""No Python file of the repository is longer than a reader holds at once: `MAX_LINES` lines,
for the harness, the fakes, the suites, the tests and every script alike, with room to grow under
the house's hard ceiling of `CEILING` lines. A file that grows past it is split by topic into
modules whose names say what they hold.

Hidden directories (`.git`, the virtual environments `.venv*`, tool caches) and build output are
not the repository's own files, and are skipped."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 550
CEILING = 600
SKIPPED_DIRECTORIES = {"build", "dist", "node_modules", "__pycache__"}


def python_files(root: Path) -> list[Path]:
    found = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if not name.startswith(".")
            and name not in SKIPPED_DIRECTORIES
            and not name.endswith(".egg-info")
        )
        found += [Path(directory) / name for name in sorted(files) if name.endswith(".py")]
    return found


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8", errors="replace").splitlines())


def test_the_walk_sees_the_repository() -> None:
    seen = {path.relative_to(ROOT).as_posix() for path in python_files(ROOT)}
    assert {"rl_conformance/plugin/session.py", "fake_backends/__init__.py"} <= seen
    assert "suites/__init__.py" in seen and Path(__file__).relative_to(ROOT).as_posix() in seen
    assert not any(part.startswith(".") for name in seen for part in Path(name).parts)


def test_no_python_file_is_over_the_length_a_reader_holds() -> None:
    lengths = {path.relative_to(ROOT).as_posix(): line_count(path) for path in python_files(ROOT)}
    over = {name: lines for name, lines in lengths.items() if lines > MAX_LINES}
    assert not over, f"over {MAX_LINES} lines (split each by topic): " + ", ".join(
        f"{name} ({lines} lines)" for name, lines in sorted(over.items())
    )
