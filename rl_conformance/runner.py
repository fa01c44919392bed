"""`run(config) -> RunResult`: one conformance run, in process, from a validated `RunConfig` to
the matrix in memory (and written to the report files). The command line, the kill matrix and
the pass-through study all run through here."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .config import RunConfig
from .matrix import Matrix

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
VERBOSITY = {
    "quiet": ["-q", "-rN", "--tb=no", "--no-header"],
    "normal": ["-q", "-rN", "--tb=no"],
    "verbose": ["-rfE", "--tb=short"],
}


@dataclass(frozen=True)
class RunResult:
    matrix: Matrix | None
    """None when no test could run (a configuration pytest refused, an internal error)."""
    pytest_exit: int

    @property
    def exit_status(self) -> int:
        """0 if and only if the matrix exists and no cell is fail or error."""
        if self.matrix is None:
            return EXIT_USAGE if self.pytest_exit in (3, 4) else EXIT_FAILED
        return EXIT_OK if self.matrix.exit_status == 0 else EXIT_FAILED


def suites_dir() -> Path:
    return Path(str(resources.files("rl_conformance.suites")))


def run(
    config: RunConfig, *, verbosity: str = "normal", pytest_args: Sequence[str] = ()
) -> RunResult:
    """Run the suites against the configured targets. Raises `ConfigurationError` for an
    inconsistent configuration before anything starts."""
    import pytest

    from .plugin import ConformanceRun

    config.validate()
    plugin = ConformanceRun(config, progress=verbosity == "normal")
    with tempfile.TemporaryDirectory(prefix="rl-conformance-") as scratch:
        ini = Path(scratch) / "pytest.ini"
        ini.write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
        args = [
            str(suites_dir()),
            "-c",
            str(ini),
            "--rootdir",
            str(suites_dir()),
            "-p",
            "no:cacheprovider",
            *VERBOSITY[verbosity],
            *pytest_args,
        ]
        code = pytest.main(args, plugins=[plugin])
    return RunResult(plugin.matrix, int(code))
