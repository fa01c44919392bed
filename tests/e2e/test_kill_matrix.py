"""The kill matrix gates every check: each named fault is killed by exactly the capabilities it
is expected to flip (no more: no unrelated flip), every check kills at least one fault, and the
clean fakes pass everything."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from checks.test_checks_fail_on_violations import CASES

from fake_backends import FAULT_NAMES
from rl_conformance.checks.base import rule_ids
from rl_conformance.contract import BY_ID

pytestmark = pytest.mark.slow
REVIEWED = json.loads(
    (
        Path(__file__).resolve().parents[2] / "fixtures" / "expected" / "kill-matrix-flips.json"
    ).read_text()
)
EXPECTED = REVIEWED["flips"]
MAY_ALSO = {k: set(v) for k, v in REVIEWED.get("may_also_flip", {}).items() if k != "_why"}
"""Secondary flips a slow machine shows and a quick one does not: allowed, never required."""


@pytest.fixture(scope="module")
def kill_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("kill")
    subprocess.run(
        [sys.executable, "-m", "rl_conformance", "kill-matrix", "--report-dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    return directory


@pytest.fixture(scope="module")
def kill(kill_directory: Path) -> dict[str, Any]:
    return json.loads((kill_directory / "kill-matrix.json").read_text())


def test_every_failure_names_its_requirement_and_reproduces(kill_directory: Path) -> None:
    """Across the fault catalogue, each failing cell carries its evidence and a reproducer: the
    failing exchange's curl with its wire log, or, when no single exchange shows it (a refresh
    sequence), the test's requests in order with the wire log of all of them. Each
    single-exchange reproducer that may be re-sent (read-only, not bound to a moment of its
    test) was re-sent right after the failure with curl and gave the same response; the others
    say why they were not."""
    matrix = json.loads((kill_directory / "matrix.json").read_text())
    outcomes: Counter[str] = Counter()
    for row in matrix["capabilities"]:
        assert row["spec"]["quote"] and row["spec"]["section"], row["id"]
        for target, cell in row["cells"].items():
            if cell["outcome"] != "fail":
                continue
            assert cell["evidence"], f"{row['id']} on {target}: no evidence"
            for item in cell["evidence"]:
                where = f"{row['id']} on {target}: {item['message']}"
                assert item["message"] and "expected" in item and "observed" in item, where
                assert item["reproducer"], f"{where}: no reproducer"
                assert (kill_directory / item["wire_log"]).exists(), where  # every failure's
                if item["reproducer"].startswith("# "):  # the test's requests, in order
                    assert "curl " in item["reproducer"], where
                    wire = json.loads((kill_directory / item["wire_log"]).read_text())
                    assert wire["requests"] == len(wire["sequence"]) + wire.get(
                        "exchanges_elided", 0
                    ), where
                    outcomes["sequence"] += 1
                    continue
                assert item["reproduced"] is not False, f"{where}: {item['reproduction']}"
                outcomes[str(item["reproduced"])] += 1
                if item["reproduced"] is None:
                    assert item["reproduction"].startswith("not replayed: "), where
    assert outcomes["True"] > 200, outcomes


def test_clean_fakes_pass_everything(kill: dict[str, Any]) -> None:
    assert kill["complete"]
    assert kill["clean_failures"] == []


def test_every_check_kills_at_least_one_fault(kill: dict[str, Any]) -> None:
    assert set(kill["checks"]) == set(rule_ids())
    assert kill["checks_killing_nothing"] == []


def test_a_rule_with_no_case_fails_on_a_fault_made_to_break_its_row(kill: dict[str, Any]) -> None:
    """`tests/checks` owes no faithful and violating case for a row's own check whose row names
    the faults made to break it: the kill matrix shows it instead, one of those faults failing
    that very check (and the clean fakes passing it: `test_clean_fakes_pass_everything`)."""
    failed = {item["fault"]: set(item["failed_checks"]) for item in kill["faults"]}
    for check_id in sorted(set(rule_ids()) - set(CASES)):
        faults = BY_ID[check_id].flipped_by
        assert any(check_id in failed.get(fault, set()) for fault in faults), (
            f"{check_id} has no case in tests/checks and none of {faults} fails it"
        )


def test_every_fault_is_expected_and_killed(kill: dict[str, Any]) -> None:
    assert sorted(item["fault"] for item in kill["faults"]) == sorted(FAULT_NAMES)
    assert set(EXPECTED) == set(FAULT_NAMES)
    assert kill["unkilled_faults"] == []


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_fault_flips_exactly_its_capabilities(kill: dict[str, Any], fault: str) -> None:
    observed = next(item for item in kill["faults"] if item["fault"] == fault)
    missing = sorted(set(EXPECTED[fault]) - set(observed["flipped"]))
    unrelated = sorted(set(observed["flipped"]) - set(EXPECTED[fault]) - MAY_ALSO.get(fault, set()))
    assert not missing and not unrelated, {
        "no longer killed by": missing,
        "unrelated flips": unrelated,
    }
