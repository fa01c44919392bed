"""The run's hypothesis: the profile every property test of the suites runs with (examples and
shrinking from the run's configuration), and where hypothesis keeps its files during the run
(under the report directory), restored at the end."""

from __future__ import annotations

import os
from typing import Any

from ..model.config import RunConfig

PROFILE = "rl-conformance-run"


def load_hypothesis_profile(run: RunConfig) -> None:
    """Examples and shrinking for every property test of the run: read when a test runs, so
    the suites need no settings of their own. No example database (a deployment is not a
    function of our code), no per-example deadline (the client enforces its own). Imported
    here, not at module level: pytest must import hypothesis itself, to rewrite its asserts."""
    from hypothesis import HealthCheck, Phase, settings

    phases = list(Phase) if run.shrink else [Phase.explicit, Phase.reuse, Phase.generate]
    settings.register_profile(
        PROFILE,
        max_examples=run.examples,
        phases=phases,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    settings.load_profile(PROFILE)


def hypothesis_home_in(report_path: Any) -> tuple[bool, Any]:
    """Hypothesis keeps its files (a cache of each module's constants) under the report
    directory, not in the working directory, unless HYPOTHESIS_STORAGE_DIRECTORY names a place.
    Returns what to restore at the end (the run's process may run other sessions after)."""
    from hypothesis import configuration

    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return (False, None)
    before = vars(configuration).get("__hypothesis_home_directory")
    configuration.set_hypothesis_home_dir(report_path / ".hypothesis")
    return (True, before)


def restore_hypothesis_home(saved: tuple[bool, Any]) -> None:
    changed, before = saved
    if changed:
        from hypothesis import configuration

        configuration.set_hypothesis_home_dir(before)


def without_local_constants() -> Any:
    """Hypothesis mixes into what it generates the literals of every module it deems local:
    ours, when the suite is an editable install (never from a wheel). The examples a seed
    gives would then depend on how the suite was installed and on its own source, and the
    scan costs about half a second before the first test. A run turns it off; hypothesis
    offers no setting for it, so its (private) provider function is replaced where it exists,
    else the scan stays. Returns what `restore_local_constants` puts back."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return None
    original = getattr(providers, "_get_local_constants", None)
    empty = getattr(providers, "_local_constants", None)
    if original is None or empty is None or len(empty) != 0:
        return None
    providers._get_local_constants = lambda: empty
    return original


def restore_local_constants(original: Any) -> None:
    if original is not None:
        from hypothesis.internal.conjecture import providers

        providers._get_local_constants = original
