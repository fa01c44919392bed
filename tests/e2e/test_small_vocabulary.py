"""A model whose vocabulary holds 4,096 ids (real vLLM refuses a prompt id beyond it with 400)
passes `refresh.kv_invalidation`: the suite's cache prompt is built from ids every vocabulary it
targets holds, sized to the stated context window, so the verdict no longer depends on the
model the suite was calibrated on; the same deployment that does not flush, or whose workers
cannot be pinned by the ids it lists (a refusal of the cache prompt that a short prompt meets
too), still fails it. A model whose vocabulary does not even hold the suite's ids gets no `fail`
from that: a refusal of the suite's own prompt is skipped, naming why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fake_backends import FakeDeployment
from rl_conformance.model.prompts import SUITE_IDS

from .legal_variants import cells_by_url, newly_failing
from .test_launch_mode_equivalence import CHECKPOINTS, by_url, cells, run

pytestmark = pytest.mark.slow
ROW = "refresh.kv_invalidation"


def mutating(fleet: FakeDeployment, directory: Path, *rows: str) -> dict[str, dict[str, Any]]:
    flags = (*by_url(fleet, workers=False), "--allow-mutations", "--all-workers", *CHECKPOINTS)
    return cells(run(directory, *flags, *(f"--capability={row}" for row in rows)))


@pytest.mark.parametrize(
    "faults",
    [(), ("kv_not_flushed",), ("instance_id_rounded",)],
    ids=["flushes", "keeps", "unpinnable"],
)
def test_kv_invalidation_is_judged_on_a_4096_id_vocabulary(
    faults: tuple[str, ...], tmp_path: Path
) -> None:
    with FakeDeployment("vllm", vocabulary=4096, faults=faults) as fleet:
        cell = mutating(fleet, tmp_path, ROW)[ROW]
    assert cell["outcome"] == ("fail" if faults else "pass"), cell["reason"]


def test_a_vocabulary_without_the_suites_ids_fails_nothing_for_it(tmp_path: Path) -> None:
    with FakeDeployment("vllm", workers=2) as plain:
        expected = cells_by_url(plain, tmp_path / "plain")
    with FakeDeployment("vllm", workers=2, vocabulary=SUITE_IDS[-1]) as small:
        observed = cells_by_url(small, tmp_path / "small")
    assert not newly_failing(expected, observed)
    skipped = [cell["reason"] for cell in observed.values() if cell["outcome"] == "skipped"]
    assert any("the suite's prompt was refused" in reason for reason in skipped), skipped


def test_a_deployment_refusing_every_token_prompt_still_fails(tmp_path: Path) -> None:
    """Not a small vocabulary: it refuses even the suite's lowest id alone, which is its own
    failure, never the suite's."""
    with FakeDeployment("vllm", workers=1, vocabulary=1) as refusing:
        matrix = run(
            tmp_path, *by_url(refusing, workers=False), "--capability=tokens.completion_ids"
        )
    (target,) = matrix["targets"]
    assert target["topology"]["prompts"]["refused"] is None
    cell = cells(matrix)["tokens.completion_ids"]
    assert cell["outcome"] == "fail" and "HTTP 400" in cell["reason"], cell
