"""`suites/README.md` shows every suite test beside the sentence it certifies, generated from the
tests' markers and the registry: it must match what the command prints now, and no test may name
a capability the registry does not have, or none."""

from __future__ import annotations

from pathlib import Path

from rl_conformance.model.capabilities import BY_ID
from rl_conformance.reports.suite_index import SUITES, render_suite_index, suite_tests

INDEX = Path(__file__).resolve().parents[2] / "suites" / "README.md"


def test_the_index_is_the_generated_one() -> None:
    assert INDEX.read_text(encoding="utf-8") == render_suite_index(suite_tests()), (
        "regenerate: rl-conformance capabilities --suite-index > suites/README.md"
    )


def test_every_suite_test_certifies_a_registered_capability() -> None:
    tests = suite_tests()
    assert len(tests) > 75
    assert all(test.capability in BY_ID for test in tests), [
        f"{t.module}::{t.name}" for t in tests if t.capability not in BY_ID
    ]
    assert {t.module for t in tests} == {path.name for path in SUITES.glob("test_*.py")}


def test_a_test_without_a_marker_is_named(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text('def test_plain() -> None:\n    """Does. Things."""\n')
    (test,) = suite_tests(tmp_path)
    assert (test.capability, test.summary) == ("", "Does.")
    assert "`test_plain`: names no registered capability" in render_suite_index([test])
