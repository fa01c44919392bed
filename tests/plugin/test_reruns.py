"""A test that met a worker dying of an earlier test's call runs again, once, and only its
second run is reported; a test that failed on its own is not run again."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

PLUGIN = """
import pytest
from rl_conformance.model.matrix import Outcome, TestRecord
from rl_conformance.plugin import reruns

RERUNS = reruns.Reruns()
RUNS = []


def record(nodeid, outcome):
    return TestRecord(nodeid, ("admin.pause_cycles",), "fake-x", outcome)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    return reruns.run_protocol(item, nextitem, RERUNS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call":
        return
    RUNS.append((item.name, report.outcome, RERUNS.carried(item.nodeid) is not None))
    if item.name.startswith("test_met_a_dying_worker") and report.failed:
        earlier = record("test_earlier", Outcome.PASS)
        RERUNS.consider(record(item.nodeid, Outcome.FAIL), earlier)


def pytest_sessionfinish(session):
    print("RUNS", RUNS)
"""

TESTS = """
import pytest

CALLS = []


@pytest.fixture(scope="module")
def deployment():
    CALLS.append("up")
    yield "worker"
    CALLS.append("down")


def test_met_a_dying_worker(deployment):
    CALLS.append("run")
    assert CALLS.count("run") > 1, "the first pause was not answered"


def test_fails_on_its_own(deployment):
    assert False


def test_after_them(deployment):
    assert CALLS.count("up") == 1
"""


def test_a_test_that_met_a_dying_worker_runs_again_and_reports_once(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(PLUGIN)
    pytester.makepyfile(test_dying=TESTS)
    result = pytester.runpytest_subprocess("-q", "-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    runs = next(line for line in result.outlines if "RUNS" in line)
    assert runs.split("RUNS ", 1)[1] == (
        "[('test_met_a_dying_worker', 'failed', False), "
        "('test_met_a_dying_worker', 'passed', True), "
        "('test_fails_on_its_own', 'failed', False), ('test_after_them', 'passed', False)]"
    )
