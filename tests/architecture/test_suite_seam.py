"""What a suite test may import: the seam between the suites and the harness, listed once here
and in CONTRIBUTING.md ("What a suite test may import"). A suite gathers evidence through the
client and the administration API, judges it with the checks, and says what it could not judge
with the package's outcomes; the plugin, the launchers, the reports, the CLI, certification and
the fakes stay out of its reach, so a suite runs the same against any deployment."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SEAM = (
    "rl_conformance",  # the package's door: FeatureAbsent, MissingInput, Unobservable
    "rl_conformance.contract",  # the rows a test certifies
    "rl_conformance.checks",  # pure checks the evidence is handed to
    "rl_conformance.errors",
    "rl_conformance.client.http",  # the requests a test sends
    "rl_conformance.wire",  # what was sent and came back, streams, traces
    "rl_conformance.control",  # the administration API: workers, pauses, updates
    "rl_conformance.model.target",  # the deployment under test
    "rl_conformance.model.verdict",  # the verdict a test reports through
    "rl_conformance.model.prompts",
    "rl_conformance.model.strategies",
    "rl_conformance.model.releases",
)
"""Modules (with their submodules) a suite may import from the harness."""


def within_seam(module: str) -> bool:
    if module == "rl_conformance":
        return True
    return any(
        module == door or module.startswith(door + ".") for door in SEAM if door != "rl_conformance"
    )


def harness_imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if within_seam(node.module):
                found.append((node.lineno, node.module))
            else:  # `from rl_conformance.model import strategies` imports a submodule
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [
        (line, module)
        for line, module in found
        if module.split(".")[0] in {"rl_conformance", "fake_backends"}
    ]


def test_every_suite_imports_only_through_the_seam() -> None:
    outside = [
        f"suites/{path.name}:{line} imports {module}"
        for path in sorted((ROOT / "suites").glob("*.py"))
        for line, module in harness_imports(path)
        if not within_seam(module)
    ]
    assert not outside, "outside the suites' seam (tests/architecture/test_suite_seam.py): " + (
        "; ".join(outside)
    )


def test_the_seam_refuses_what_a_suite_must_not_reach() -> None:
    for module in (
        "rl_conformance.plugin.state",
        "rl_conformance.launchers.fake",
        "rl_conformance.model.options",
        "rl_conformance.reports",
        "fake_backends",
    ):
        assert not within_seam(module), module
    assert within_seam("rl_conformance.control.admin") and within_seam("rl_conformance.contract")
