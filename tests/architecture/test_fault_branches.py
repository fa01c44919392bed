"""Every fault branch of the fakes is written one way: `faults.active("name")`.

The fault set is the base layer's (`fake_backends/faults/`), so each layer asks it directly, on
the set it holds (`state.faults`, `worker.runtime.faults`, `engine.faults`): no helper of a
higher layer stands between a branch and the catalogue, and a grep for a fault's name finds
every branch it switches. Outside `fake_backends/faults/` (where the catalogues are declared), a
fault's name is written only as the argument of `faults.active(...)`, directly or through a
module constant, so another spelling (`state.fault(...)`, a wrapper taking the name) fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fake_backends.faults.deployment import FAULT_NAMES
from fake_backends.faults.engine import ENGINE_FAULT_NAMES

ROOT = Path(__file__).resolve().parents[2] / "fake_backends"
NAMES = frozenset(FAULT_NAMES) | frozenset(ENGINE_FAULT_NAMES)


def branch_modules() -> list[Path]:
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if "__pycache__" not in path.parts and path.relative_to(ROOT).parts[0] != "faults"
    )


def is_fault_set(node: ast.expr) -> bool:
    """`faults` or `<anything>.faults`: the set a branch asks."""
    return (isinstance(node, ast.Name) and node.id == "faults") or (
        isinstance(node, ast.Attribute) and node.attr == "faults"
    )


def is_branch(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "active"
        and is_fault_set(node.func.value)
        and len(node.args) == 1
        and not node.keywords
    )


def fault_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level `NAME = "fault_name"` bindings."""
    return {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and node.value.value in NAMES
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def misspelt_branches(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    constants = fault_constants(tree)
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in NAMES:
            parent = parents.get(node)
            constant_binding = isinstance(parent, ast.Assign) and parent in tree.body
            if not (is_branch(parent) or constant_binding):
                wrong.append(f"line {node.lineno}: {ast.unparse(parent or node)}")
        elif isinstance(node, ast.Name) and node.id in constants and isinstance(node.ctx, ast.Load):
            if not is_branch(parents.get(node)):
                wrong.append(f"line {node.lineno}: {ast.unparse(parents.get(node) or node)}")
        elif is_branch(node):
            (arg,) = node.args  # type: ignore[attr-defined]
            named = (isinstance(arg, ast.Constant) and arg.value in NAMES) or (
                isinstance(arg, ast.Name) and arg.id in constants
            )
            if not named:
                wrong.append(f"line {node.lineno}: {ast.unparse(node)} (not a fault's name)")
    return sorted(wrong, key=lambda line: int(line.split()[1].rstrip(":")))


@pytest.mark.parametrize("path", branch_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fault_branch_asks_the_fault_set(path: Path) -> None:
    wrong = misspelt_branches(path)
    assert not wrong, (
        f'a fault branch is written `faults.active("name")` on the set the code holds '
        f"(CONTRIBUTING.md, Adding a capability); {path.name} has: {wrong}"
    )


def test_the_rule_catches_another_spelling(tmp_path: Path) -> None:
    """The rule is not vacuous: each retired spelling, and a wrapper, is caught."""
    module = tmp_path / "old.py"
    module.write_text(
        "def f(state, worker, name):\n"
        "    a = state.fault('stream_truncated')\n"
        "    b = deployment_fault(worker, 'resume_slow')\n"
        "    c = worker.runtime.faults.active(name)\n"
        "    d = state.faults.active('stream_truncated')\n"
    )
    wrong = misspelt_branches(module)
    assert [line.split(":")[0] for line in wrong] == ["line 2", "line 3", "line 4"]
