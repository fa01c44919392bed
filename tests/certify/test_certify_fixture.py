"""The pytest fixture a framework uses to run the scenarios inside its own tests."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_a_framework_suite_runs_the_scenarios_with_the_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["rl_conformance.certify.testing"]\n')
    pytester.makepyfile(
        """
        import pytest
        from rl_conformance.certify.reference import ReferenceAdapter
        from rl_conformance.certify.twins import ReopensAfterFailedFlush

        @pytest.mark.parametrize("scenario", ["iteration", "flush_fails"])
        def test_reference(certify_scenario, scenario):
            certify_scenario(ReferenceAdapter, scenario).assert_passed()

        def test_twin(certify_scenario):
            certify_scenario(ReopensAfterFailedFlush, "flush_fails").assert_passed()
        """
    )
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*adapter.gated_after_failure: resumed after a failed call*"])
