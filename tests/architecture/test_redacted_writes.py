"""Every file the harness writes goes through the redactor (`rl_conformance.redaction`): no
module writes a file by itself, but those that write outside any report (installers writing into
a virtual environment, the generated sources and docs, a temporary pytest.ini) and the logs a
launched deployment writes itself, which credentials never reach (they go only to a deployment
given by URL, `RunConfig.check_credentials`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "rl_conformance"
WRITES_NO_REPORT = {
    "redaction.py": "the one writer",
    "launchers/dynamo_install.py": "patches a file of the environment it installs",
    "launchers/sglang_install.py": "a .pth file of the environment it installs",
    "plugin/runner.py": "a temporary pytest.ini",
    "cli/generation_costs.py": "the package's generation_costs.json and suite_seconds.json",
    "cli/releases.py": "a block of a document in the repository",
    "launchers/fake.py": "the log a launched fake writes itself (it is sent no credential)",
    "launchers/processes.py": "the log a launched Dynamo writes itself (it is sent none)",
}
WRITE_MODES = ("w", "a", "x", "+")


def writes(path: Path) -> list[str]:
    """The file writes of a module: `.write_text(`, `.write_bytes(`, and `open(` in a mode that
    writes."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Attribute) and function.attr in ("write_text", "write_bytes"):
            found.append(f"line {node.lineno}: .{function.attr}(")
        is_open = (isinstance(function, ast.Name) and function.id == "open") or (
            isinstance(function, ast.Attribute) and function.attr == "open"
        )
        if is_open:
            modes = [arg for arg in node.args[1:2]] + [
                k.value for k in node.keywords if k.arg == "mode"
            ]
            for mode in modes:
                if isinstance(mode, ast.Constant) and any(
                    m in str(mode.value) for m in WRITE_MODES
                ):
                    found.append(f"line {node.lineno}: open(..., {mode.value!r})")
    return found


def test_every_file_a_run_writes_is_redacted() -> None:
    unredacted = {
        str(path.relative_to(ROOT)): found
        for path in sorted(ROOT.rglob("*.py"))
        if (found := writes(path)) and str(path.relative_to(ROOT)) not in WRITES_NO_REPORT
    }
    assert not unredacted, (
        f"write through rl_conformance.redaction (write_text, write_bytes, open_text): {unredacted}"
    )


def test_the_exceptions_still_write() -> None:
    """Each module excused still writes a file (else its excuse is stale)."""
    stale = [name for name in WRITES_NO_REPORT if not writes(ROOT / name)]
    assert not stale, f"excused but writing nothing: {stale}"
