"""fake_backends is built in layers, and it never imports the harness it is a fake for.

Each subpackage may import only the layers listed for it (module-level and function-level
imports alike), so an arrow that points up or sideways fails here before it becomes a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "fake_backends"
BASE = {"encoding", "model", "faults"}
ALLOWED: dict[str, set[str]] = {
    "encoding": set(),
    "model": set(),
    "faults": set(),
    "runtime": BASE,
    "frontend": BASE | {"runtime"},
    "discovery": BASE | {"runtime"},
    "admin": BASE | {"runtime"},
    "deployment": BASE | {"runtime", "frontend", "discovery", "admin"},
    "dynamo": BASE | {"runtime", "admin"},
    "__init__": {"deployment", "faults", "runtime"},
    "__main__": {"deployment", "faults", "runtime"},
    "zygote": {"__main__"},
}
# What runs inside the Dynamo environment must import without starlette, uvicorn or httpx.
PURE = ("model", "faults", "runtime", "dynamo")


def modules() -> list[Path]:
    return sorted(path for path in ROOT.rglob("*.py") if "__pycache__" not in path.parts)


def layer_of(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imported(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_import_points_down_the_layers(path: Path) -> None:
    layer = layer_of(path)
    assert layer in ALLOWED, f"{layer}: a new layer must be placed in ALLOWED"
    wrong = [
        module
        for module in imported(path)
        if module.startswith("fake_backends.")
        and (target := module.split(".")[1]) != layer
        and target not in ALLOWED[layer]
    ]
    assert not wrong, f"{layer} may import {sorted(ALLOWED[layer])}, not {wrong}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_fakes_never_import_the_harness(path: Path) -> None:
    assert not [m for m in imported(path) if m.split(".")[0] == "rl_conformance"]


@pytest.mark.parametrize(
    "path",
    [path for path in modules() if layer_of(path) in PURE],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_what_runs_in_the_dynamo_environment_needs_no_web_server(path: Path) -> None:
    servers = {"starlette", "uvicorn", "httpx"}
    assert not [m for m in imported(path) if m.split(".")[0] in servers]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycle_between_modules() -> None:
    names = {module_name(path): path for path in modules()}
    graph = {
        name: {m for m in imported(path) if m in names and m != name}
        for name, path in names.items()
    }
    cycles = []
    for start in graph:
        stack = [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.append(trail)
                elif nxt not in trail and len(trail) < 12:
                    stack.append((nxt, [*trail, nxt]))
    assert not cycles, cycles[:3]
