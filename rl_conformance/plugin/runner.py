"""`run(plan) -> RunResult`: one conformance run, in process, from its `RunPlan` to the matrix in
memory (and written to the report files). The command line, the kill matrix and the pass-through
study all run through here."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..data_dirs import data_dir
from ..launchers.run_plan import RunPlan
from ..model import stops
from ..model.exits import EXIT_FAILED, EXIT_USAGE
from ..model.matrix import Matrix

MAX_JOBS = 12
JOBS_PER_CORE = 6
INI = """[pytest]
filterwarnings =
    ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning
    ignore::pluggy.PluggyTeardownRaisedWarning
"""
# The second: a Ctrl-C that lands while a test's record is made interrupts the run as any other
# does; pluggy's warning about it would only repeat the interrupt in pytest's words.
# The suites judge through `rl_verdict`, not through assert introspection, and use neither
# async tests nor unraisable-exception warnings: each process of a run is spared rewriting
# modules on import (no bytecode cache where PYTHONDONTWRITEBYTECODE is set) and the
# plugins' start-up and end-of-session garbage collections.
LEAN = [
    "--assert=plain",
    "-p",
    "no:anyio",
    "-p",
    "no:asyncio",
    "-p",
    "no:unraisableexception",
    "-p",
    "no:threadexception",
]
VERBOSITY = {
    "quiet": ["-qq", "-rN", "--tb=no", "--no-header", "-o", "console_output_style=classic"],
    "normal": ["-qq", "-rN", "--tb=no"],
    "verbose": ["-rfE", "--tb=short"],
}
"""pytest's own counts are of tests, not of cells: the run's summary (`reports.console`) says
what the matrix holds, so pytest's last line is left out but with `--verbose`."""


class QuietLetters:
    """`--quiet`: no progress letter per test (the counts stay pytest's)."""

    @staticmethod
    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(report: Any) -> tuple[str, str, str]:
        if report.skipped:
            return ("skipped", "", "")
        if report.failed:
            return ("failed" if report.when == "call" else "error", "", "")
        return ("passed" if report.when == "call" else "", "", "")


@dataclass(frozen=True)
class RunResult:
    matrix: Matrix | None
    """None when no test could run (a configuration pytest refused, an internal error)."""
    pytest_exit: int

    @property
    def exit_status(self) -> int:
        """The matrix's (`Matrix.exit_status`, `model.exits`); without a matrix, 2 for a
        configuration pytest refused, else 1."""
        if self.matrix is None:
            return EXIT_USAGE if self.pytest_exit in (3, 4) else EXIT_FAILED
        return self.matrix.exit_status


def suites_dir() -> Path:
    return data_dir("suites")


def parallel_jobs(plan: RunPlan, most: int = MAX_JOBS) -> int:
    """Processes for a run: one per group of tests (`balance.planned_groups`: one per target,
    several for a target cheap to start again), at most `most` and `JOBS_PER_CORE` times the
    cores (a group's tests mostly wait on its deployment); 1 (in process) for a single group,
    and for a release matrix, whose real engines are launched one after another (each takes the
    cores and gigabytes a second one would need)."""
    from .balance import planned_groups

    config = plan.config
    if config.launch and len(config.dynamo_python) > 1:
        return 1
    groups = planned_groups(plan.pool.ids, plan.split_targets())
    return max(1, min(groups, most, JOBS_PER_CORE * (os.cpu_count() or 1)))


def run(
    plan: RunPlan,
    *,
    verbosity: str = "normal",
    pytest_args: Sequence[str] = (),
    jobs: int = 1,
) -> RunResult:
    """Run the suites against the planned targets (`run_plan.plan_run`, which refused a wrong
    configuration before anything started). With `jobs` > 1 up to that many targets are tested
    at once, each target's tests together and in order, and the matrix is the one a serial run
    gives: in forked children where the platform forks (`plugin.forked`), else in pytest-xdist
    workers (`plugin.distribution`)."""

    from . import ConformanceRun, forked

    config = plan.config
    jobs = 1 if config.fault_matrix else jobs
    parallel: list[str] = []
    if jobs > 1 and not forked.available():
        parallel = [
            "-p",
            "xdist",
            "-n",
            str(jobs),
            "-p",
            "rl_conformance.plugin",
            *config.pytest_arguments(),
        ]
    plugin = ConformanceRun(plan, progress=verbosity == "normal", jobs=jobs)
    prepared = contextlib.ExitStack()
    scratch = Path(tempfile.mkdtemp(prefix="rl-conformance-"))
    try:
        if not config.dry_run:  # a dry run starts nothing
            # before pytest starts: the fakes' zygote imports them while pytest imports the suites
            plan.pool.prepare(prepared)
        ini = scratch / "pytest.ini"
        ini.write_text(INI)
        args = [
            str(suites_dir()),
            "-c",
            str(ini),
            "--rootdir",
            str(suites_dir()),
            # conftest.py files above the suites (a checkout's own) are not the run's
            "--confcutdir",
            str(suites_dir()),
            "-p",
            "no:cacheprovider",
            *LEAN,
            *VERBOSITY[verbosity],
            *parallel,
            *pytest_args,
        ]
        extra = [QuietLetters()] if verbosity == "quiet" else []
        code = pytest.main(args, plugins=[plugin, *extra])
    finally:
        with stops.ending():  # what the run started stops whole, even at a second Ctrl-C
            prepared.close()
            shutil.rmtree(scratch, ignore_errors=True)
    if plugin.matrix is None and code == pytest.ExitCode.INTERRUPTED and stops.received():
        # stopped before its first test: pytest kept the interrupt, the caller gets it back
        raise KeyboardInterrupt(f"signal {stops.received()}")
    return RunResult(plugin.matrix, int(code))
