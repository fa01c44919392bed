"""The harness is built in the layers ARCHITECTURE.md draws, and this test is that table.

A module may import its own layer and the layers below it, never above; only the layers that
start or study deployments may import the fakes; the checks import without the heavy
dependencies (docker, starlette, uvicorn), so an RL framework can use them as a runtime guard."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "rl_conformance"

# Lowest first. Keep ARCHITECTURE.md's table in step with this one.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "wire",
        (
            "version",
            "errors",
            "sse",
            "stream_state",
            "wire",
            "prometheus",
            "admission",
            "engine_side",
        ),
    ),
    ("checks", ("checks", "schema_registry", "namespace_scope")),
    (
        "model",
        (
            "releases",
            "config",
            "weight_transfer",
            "capabilities",
            "target",
            "verdict",
            "matrix",
            "journal",
            "provenance",
            "killmatrix",
            "baseline",
            "strategies",
        ),
    ),
    ("client", ("client", "breaker", "reproducers", "budget")),
    ("targets", ("launchers", "plan", "inputs", "dynamo_install")),
    (
        "control",
        (
            "admin",
            "families",
            "weights",
            "fleet",
            "refresh",
            "admin_steps",
            "suite_support",
            "inflight",
            "policy_reference",
        ),
    ),
    ("reports", ("reports",)),
    ("certify", ("certify",)),
    ("wiring", ("plugin", "runner")),
    ("entry", ("passthrough", "cli", "__init__", "__main__")),
)
MAY_IMPORT_FAKES = {"targets", "certify", "entry"}
HEAVY = ("docker", "starlette", "uvicorn")


def layer_of(module: str) -> int:
    head = module.split(".")[0]
    for rank, (_, members) in enumerate(LAYERS):
        if head in members:
            return rank
    raise AssertionError(f"rl_conformance.{module} is in no layer: place it in LAYERS")


def modules() -> list[Path]:
    return sorted(path for path in ROOT.rglob("*.py") if "__pycache__" not in path.parts)


def dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path) -> list[str]:
    """Imported modules, relative to rl_conformance ("checks.base"), or "fake_backends...",
    or the root package itself ("")."""
    package = dotted(path).split(".")
    if path.name != "__init__.py" or package == ["__init__"]:
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
                names = (
                    [target]
                    if node.module
                    else [f"{target}.{a.name}".strip(".") for a in node.names]
                )
                found += names
            elif node.module and node.module.startswith(("rl_conformance", "fake_backends")):
                found.append(node.module.removeprefix("rl_conformance").lstrip("."))
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("fake_backends")]
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_import_points_down_the_layers(path: Path) -> None:
    module = dotted(path)
    rank = layer_of(module)
    name = LAYERS[rank][0]
    upward = []
    for imported in imports_of(path):
        if imported.startswith("fake_backends"):
            assert name in MAY_IMPORT_FAKES, f"{module} ({name}) imports the fakes: {imported}"
            continue
        if imported and layer_of(imported) > rank:
            upward.append(f"{imported} ({LAYERS[layer_of(imported)][0]})")
    assert not upward, f"{module} ({name}) imports upward: {upward}"


def test_the_checks_import_without_the_heavy_dependencies() -> None:
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in HEAVY)
    code = f"import sys; {blocked}; import rl_conformance.checks as c; print(len(c.REGISTRY))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) > 40
