"""The pytest plugin of the conformance suites.

It does nothing unless a run is configured, so having the package installed never changes anyone
else's pytest session (it is not an auto-loaded entry point):

- `rl_conformance.plugin.runner.run(plan)` hands pytest a `ConformanceRun` for its `RunPlan`;
- `pytest -p rl_conformance.plugin --rl-fake vllm ...` (or `--rl-frontend URL --rl-backend ...`)
  builds one from the `--rl-*` options, declared from the same table as the command line's
  flags (`rl_conformance.model.config`). With no `--rl-*` option given, the plugin stays inert.

The modules: `collection` (targets as parameters, selection, ordering), `fixtures` (the `rl_*`
fixtures the suites use, and adapters may), `recording` (a test's outcome as a record),
`session` (the run's state, the matrix at the end, the console summary).
"""

from __future__ import annotations

import contextlib

import pytest

from ..errors import ConfigurationError
from ..launchers.run_plan import plan_run
from ..model.config import RunConfig
from ..model.options import OPTIONS, add_pytest_options
from ..redaction import console
from .session import ConformanceRun

__all__ = ["ConformanceRun", "pytest_addoption", "pytest_configure"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup("rl-conformance", "Dynamo RL serving-contract conformance"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register a run when `--rl-*` options were given and no run is registered yet."""
    registered = config.pluginmanager.get_plugins()
    if any(isinstance(plugin, ConformanceRun) for plugin in registered):
        return
    given = any(
        getattr(config.option, "rl_" + option.name, None) not in (None, False, [], option.default)
        for option in OPTIONS
    )
    if not given:
        return
    try:
        run = ConformanceRun(plan_run(RunConfig.from_options(config.option, prefix="rl_")))
    except ConfigurationError as exc:
        raise pytest.UsageError(str(exc)) from exc
    config.pluginmanager.register(run, ConformanceRun.NAME)
    redacted = contextlib.ExitStack()  # pytest's console too, created after this hook
    redacted.enter_context(console())
    config.add_cleanup(redacted.close)
