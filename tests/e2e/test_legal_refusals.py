"""Legal answers of unusual shapes from the control plane pass: a vLLM worker that refuses an
update while running with a 4xx of its own (409, as lmdeploy answers) passes
`admin.unpaused_update_refused`, as the handled error of Dynamo's worker does, and the same
worker applying the update (`unpaused_update_applied`) still fails it; workers listed with an
`admin_base_url` apart from their `system_url` are administered at the latter."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_backends import FakeDeployment

from .legal_variants import cells_by_url, newly_failing
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


def test_workers_listed_with_an_admin_base_url_are_administered_at_their_system_url(
    tmp_path: Path,
) -> None:
    """Dynamo 1.6.1 lists a tensor-parallel worker with `world_size` and an `admin_base_url`
    apart from its `system_url` (transfer metadata): a mutating run fails nothing the plain
    fake passes, and every administration call reaches the workers' system servers."""
    flags = ("--allow-mutations", "--all-workers", *CHECKPOINTS)
    with FakeDeployment("vllm", workers=2) as plain:
        expected = cells_by_url(plain, tmp_path / "plain", *flags)
    with FakeDeployment("vllm", workers=2, admin_base_urls=True) as sharded:
        observed = cells_by_url(sharded, tmp_path / "sharded", *flags)
        administered = len(sharded.admin_ledger)
    assert not newly_failing(expected, observed)
    assert observed["discovery.schema"]["outcome"] == "pass"
    assert observed["admin.success_semantics"]["outcome"] == "pass"
    assert administered > 0
