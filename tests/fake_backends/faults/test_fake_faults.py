"""Every fault in the catalogue manifests: each is demonstrated by a test that compares a faulty
answer with a clean one, in the module of its topic, registered with ``@shows``, or by the kill
matrix: a fault a row names as made to break it (`flipped_by`) is reviewed to flip that row
(`fixtures/expected/kill-matrix-flips.json`, held by `tests/e2e/test_kill_matrix.py`), which
shows it manifesting on the wire, against the clean fake beside it.

Every test module under `tests/fake_backends/` that registers a demonstration is imported here
(by the name pytest gives it: the conftest puts each folder on the path), wherever its topic
puts it; the completeness check fails if a fault of the catalogue has none, so adding a fault
without a test is caught.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from fake_backend_helpers import DEMONSTRATED

from fake_backends import FAULT_NAMES
from fake_backends.deployment.assembly import FakeDeployment
from rl_conformance.contract import CAPABILITIES

TESTS = Path(__file__).resolve().parents[1]
DEMONSTRATIONS = sorted(
    path for path in TESTS.rglob("test_*.py") if "@shows(" in path.read_text(encoding="utf-8")
)
for _module in DEMONSTRATIONS:
    importlib.import_module(_module.stem)  # registers its @shows demonstrations


def test_the_demonstrations_are_found_in_every_topic_folder() -> None:
    folders = {path.parent.name for path in DEMONSTRATIONS}
    assert {"admin", "discovery", "frontend", "runtime", "faults"} <= folders, folders


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_every_fault_is_demonstrated(name: str) -> None:
    made_to_break = {fault for row in CAPABILITIES for fault in row.flipped_by}
    assert name in DEMONSTRATED or name in made_to_break, (
        f"no test shows fault {name}, and no row names it in flipped_by (the kill matrix's)"
    )


def test_faults_switch_in_process(vllm: FakeDeployment) -> None:
    assert vllm.set_faults(["done_missing", "nan_logprob", "done_missing"]) == (
        "done_missing",
        "nan_logprob",
    )
    assert vllm.faults == ("done_missing", "nan_logprob")
    with pytest.raises(ValueError, match="valid faults are"):
        vllm.set_faults(["no_such_fault"])
    assert vllm.faults == ("done_missing", "nan_logprob")  # unchanged on error
    with pytest.raises(ValueError, match="no_such_fault"):
        FakeDeployment("vllm", faults=["no_such_fault"])
