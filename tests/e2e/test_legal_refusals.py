"""A vLLM worker that refuses an update while running with a 4xx of its own (409, as lmdeploy
answers) passes `admin.unpaused_update_refused`, as the handled error of Dynamo's worker does;
the same worker applying the update (`unpaused_update_applied`) still fails it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_backends import FakeDeployment

from .test_launch_mode_equivalence import CHECKPOINTS, by_url, cells, run

pytestmark = pytest.mark.slow
ROW = "admin.unpaused_update_refused"


def judged(fleet: FakeDeployment, directory: Path) -> tuple[str, str]:
    flags = (*by_url(fleet, workers=False), "--allow-mutations", "--all-workers", *CHECKPOINTS)
    cell = cells(run(directory, *flags, "--capability", ROW))[ROW]
    return cell["outcome"], cell["reason"]


@pytest.mark.parametrize("faults", [(), ("unpaused_update_applied",)], ids=["refused", "applied"])
def test_a_409_refusal_of_an_unpaused_update_is_conformant(
    faults: tuple[str, ...], tmp_path: Path
) -> None:
    with FakeDeployment("vllm", unpaused_update_status=409, faults=faults) as fleet:
        outcome, reason = judged(fleet, tmp_path)
        refusals = [r.status for r in fleet.admin_ledger if r.path.endswith("from_disk")]
    if faults:
        assert outcome == "fail" and "was not paused" in reason, reason
    else:
        assert outcome == "pass", reason
        assert 409 in refusals
