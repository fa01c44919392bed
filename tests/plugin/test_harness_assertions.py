"""A suite's bare `assert` states the harness's own expectation: when it does not hold, the test
is an `error` saying the harness could not judge, with the expectation and where, never a raw
assertion dump read as the deployment's."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rl_conformance.model.matrix import Outcome
from rl_conformance.plugin.recording import ASSERTION, record_of
from rl_conformance.plugin.state import STATE

SUITE = """
def model_identity(model):
    assert model is not None


def state_machine(failures):
    assert not failures, "reopened despite a failed step"
"""


def failed_call(error: BaseException) -> Any:
    return SimpleNamespace(excinfo=SimpleNamespace(value=error), when="call", duration=0.1)


def suite(tmp_path: Path) -> Any:
    """A suite module as a run imports it: asserts plain, not rewritten (`--assert=plain`)."""
    path = tmp_path / "test_suite_module.py"
    path.write_text(SUITE)
    spec = importlib.util.spec_from_file_location("suite_module_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def raised(check: Any, *args: Any) -> AssertionError:
    try:
        check(*args)
    except AssertionError as error:
        return error
    raise AssertionError("the check did not raise")  # pragma: no cover


def record(error: AssertionError) -> Any:
    state = SimpleNamespace(pool=SimpleNamespace(started={}))
    item = SimpleNamespace(
        nodeid="suites/test_x.py::t",
        callspec=SimpleNamespace(params={}),
        config=SimpleNamespace(stash={STATE: state}),
    )
    report = SimpleNamespace(passed=False, skipped=False)
    return record_of(item, failed_call(error), report, ("tokens.model_identity",))  # type: ignore[arg-type]


def test_a_bare_assert_is_the_harness_that_could_not_judge(tmp_path: Path) -> None:
    found = record(raised(suite(tmp_path).model_identity, None))
    assert found.outcome is Outcome.ERROR
    assert found.reason == (
        "call: the harness could not judge (`model is not None` did not hold, at "
        "test_suite_module.py:3)"
    )
    assert "AssertionError" not in found.reason
    assert found.evidence[0].check_id == ASSERTION


def test_an_assert_with_a_message_says_the_message(tmp_path: Path) -> None:
    found = record(raised(suite(tmp_path).state_machine, ["a failed step"]))
    assert found.reason == (
        "call: the harness could not judge (reopened despite a failed step, at "
        "test_suite_module.py:7)"
    )
