"""The harness's folders are its layers, as ARCHITECTURE.md draws them.

Each subpackage of `rl_conformance` is one layer; `LAYERS` is their order, lowest first. A module
may import its own layer and the layers below it, never above. The few modules at the root sit
outside the order: `version`, `errors`, `admission` and `redaction` below every layer (they
import nothing of the harness), `__init__` and `__main__` above them all (the doors). Only the
layers that start or study deployments may import the fakes; the checks import without the heavy
dependencies (docker, starlette, uvicorn), so an RL framework can use them as a runtime guard;
and no module imports another that imports it back."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "rl_conformance"

# Lowest first. Keep ARCHITECTURE.md's tree in step with this order.
LAYERS = (
    "contract",
    "engine_side",
    "wire",
    "checks",
    "model",
    "client",
    "launchers",
    "control",
    "reports",
    "certify",
    "plugin",
    "cli",
)
BELOW_ALL = ("version", "errors", "admission", "redaction", "data_dirs")
ABOVE_ALL = ("__init__", "__main__")
MAY_IMPORT_FAKES = {"launchers", "certify", "cli"}
HEAVY = ("docker", "starlette", "uvicorn")


def rank(module: str) -> int:
    head = module.split(".")[0]
    if head in BELOW_ALL:
        return -1
    if head in ABOVE_ALL or head == "":
        return len(LAYERS)
    assert head in LAYERS, f"rl_conformance.{module} is in no layer: put it in a layer's folder"
    return LAYERS.index(head)


def layer(module: str) -> str:
    found = rank(module)
    return LAYERS[found] if 0 <= found < len(LAYERS) else "root"


def modules() -> list[Path]:
    return sorted(path for path in ROOT.rglob("*.py") if "__pycache__" not in path.parts)


def dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, *, typing_too: bool = True) -> list[str]:
    """Imported modules, relative to rl_conformance ("checks.base"), or "fake_backends...",
    or the root package itself (""). `typing_too=False` leaves out `if TYPE_CHECKING:` blocks."""
    package = dotted(path).split(".")
    if path.name != "__init__.py" or package == ["__init__"]:
        package = package[:-1]
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    if not typing_too:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped |= {id(inner) for inner in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
                found += (
                    [target]
                    if node.module
                    else [f"{target}.{a.name}".strip(".") for a in node.names]
                )
            elif node.module and node.module.startswith(("rl_conformance", "fake_backends")):
                found.append(node.module.removeprefix("rl_conformance").lstrip("."))
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("fake_backends")]
    return found


def test_the_layers_are_the_folders() -> None:
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS), "every subpackage is a layer, every layer a subpackage"
    loose = {p.stem for p in ROOT.glob("*.py")}
    assert loose == set(BELOW_ALL + ABOVE_ALL), f"modules at the root: {sorted(loose)}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_import_points_down_the_layers(path: Path) -> None:
    module = dotted(path)
    own = rank(module)
    name = layer(module)
    upward = []
    for imported in imports_of(path):
        if imported.startswith("fake_backends"):
            assert name in MAY_IMPORT_FAKES, f"{module} ({name}) imports the fakes: {imported}"
            continue
        if rank(imported) > own:
            upward.append(f"{imported} ({layer(imported)})")
    assert not upward, f"{module} ({name}) imports upward: {upward}"


def test_no_two_modules_import_each_other() -> None:
    """No import cycle between modules (a package importing its own submodules aside)."""
    known = {dotted(path) for path in modules()}
    graph: dict[str, set[str]] = {}
    for path in modules():
        module = dotted(path)
        targets = set()
        for imported in imports_of(path):
            while imported and imported not in known:
                imported = imported.rpartition(".")[0]
            own_package = module.startswith(imported + ".") or (
                path.name == "__init__.py" and imported.startswith(module + ".")
            )
            if imported and imported != module and not own_package:
                targets.add(imported)
        graph[module] = targets
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not cycles, f"import cycles: {cycles}"


def test_the_checks_import_without_the_heavy_dependencies() -> None:
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in HEAVY)
    code = f"import sys; {blocked}; import rl_conformance.checks as c; print(len(c.REGISTRY))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) > 40
