"""The doors users have stay where they have them, whatever the folders inside: each public
package and door module says what it offers in an explicit `__all__`, and every name there is
reachable."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "rl_conformance"
DOOR_MODULES = ("rl_conformance.admission", "rl_conformance.certify.testing")


def packages() -> list[str]:
    found = []
    for init in sorted(ROOT.rglob("__init__.py")):
        if "__pycache__" not in init.parts:
            parts = init.parent.relative_to(REPO).parts
            found.append(".".join(parts))
    return found


def declared_all(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text()).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert node.value is not None
            return list(ast.literal_eval(node.value))
    return None


@pytest.mark.parametrize("name", [*packages(), *DOOR_MODULES])
def test_every_public_package_declares_what_it_offers(name: str) -> None:
    module = importlib.import_module(name)
    path = Path(str(module.__file__))
    offered = declared_all(path)
    assert offered is not None, f"{name} has no explicit __all__"
    assert len(set(offered)) == len(offered), f"{name}.__all__ repeats a name"
    for item in offered:
        if not hasattr(module, item):
            importlib.import_module(f"{name}.{item}")  # a submodule, imported by name


def test_the_root_exports_what_it_always_has() -> None:
    import rl_conformance

    assert set(rl_conformance.__all__) == {*rl_conformance._EXPORTS, "__version__"}
    for name in rl_conformance.__all__:
        assert getattr(rl_conformance, name) is not None


def test_the_guard_and_the_adapter_protocol_import_nothing_else() -> None:
    code = (
        "import sys, rl_conformance.admission, rl_conformance.certify.protocol; "
        "print(sorted(m for m in sys.modules if m.startswith('rl_conformance')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ast.literal_eval(done.stdout) == [
        "rl_conformance",
        "rl_conformance.admission",
        "rl_conformance.certify",
        "rl_conformance.certify.protocol",
        "rl_conformance.version",
    ]


def test_the_doors_are_where_users_have_them() -> None:
    from rl_conformance.admission import admit_sample
    from rl_conformance.certify.testing import certify_scenario
    from rl_conformance.checks import REGISTRY
    from rl_conformance.cli import command, main
    from rl_conformance.plugin import pytest_addoption, pytest_configure

    assert callable(admit_sample) and callable(certify_scenario) and callable(main)
    assert callable(command)
    assert callable(pytest_addoption) and callable(pytest_configure) and len(REGISTRY) > 40
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["rl-conformance"] == "rl_conformance.cli:command"  # main, then the exit


def test_python_dash_m_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rl_conformance", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()


def test_every_subpackage_is_in_the_wheel() -> None:
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    assert set(packages()) <= listed, sorted(set(packages()) - listed)
