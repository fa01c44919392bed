"""docs/LAYOUT.md is true: each row's path exists, and every name it gives inside the row's
folder (a subfolder, a file, a module's attribute, a function) is found there."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `([^`]+)` \| (.*) \|$", re.M)
NAME = re.compile(r"`([^`]+)`")


def found_in(folder: Path, name: str) -> bool:
    """Whether `name`, as LAYOUT.md writes it inside the row of `folder`, exists."""
    if name.startswith(("-", "@")) or (name.endswith(".json") and "/" not in name):
        return True  # a flag, a marker, a file a run writes
    if "(" in name:  # run(plan): a function of the package and its first parameter
        function, argument = name.rstrip(")").split("(", 1)
        return any(
            re.search(rf"^def {function}\(\s*{argument}\b", path.read_text(encoding="utf-8"), re.M)
            for path in folder.rglob("*.py")
        )
    module, _, attribute = name.partition(".")
    if attribute and not attribute.endswith(("md", "py", "json")):  # model/options.OPTIONS
        dotted = f"{folder.name}.{module.replace('/', '.')}"
        return hasattr(importlib.import_module(dotted), attribute)
    candidates = [folder / name, ROOT / name, ROOT / "docs" / name, folder / f"{name}.py"]
    return any(candidate.exists() for candidate in candidates) or any(
        path.name == name.rstrip("/") for path in folder.rglob("*")
    )


def test_every_path_and_name_in_the_layout_exists() -> None:
    text = (ROOT / "docs" / "LAYOUT.md").read_text(encoding="utf-8")
    rows = ROW.findall(text)
    assert len(rows) >= 9
    missing = []
    for path, what in rows:
        folder = ROOT / path
        if not folder.exists():
            missing.append(path)
            continue
        missing += [f"{path}: {name}" for name in NAME.findall(what) if not found_in(folder, name)]
    assert not missing, "docs/LAYOUT.md names what the repository lacks: " + "; ".join(missing)
