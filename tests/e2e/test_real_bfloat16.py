"""The served policy on real engines as GPU fleets serve them: vLLM 0.31.0 and SGLang 0.5.21 (CPU
builds) behind the real Dynamo 1.6.1, with checkpoints stored and served in bfloat16, reached BY
URL with nothing but the documented flags (`--frontend`, `--rl-url`, `--worker-url` for SGLang,
`--update-model-path` twice, `--reference-python`), as a backend maintainer runs the suite against
a fleet of their own. The deployment is started here only to have one: the run knows nothing of
it but its URLs.

A bfloat16 engine differs from the float32 reference by up to a quarter of a nat (vLLM and SGLang
alike, measured): each update must still be judged the checkpoint sent, and the post-update
generations judged like any other. The tied-layout update that keeps the old output head still
fails on the float32 column (`test_real_vllm.py`), under the same tolerance."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.launchers.dynamo import DynamoLauncher
from rl_conformance.model.target import Target

from .test_real_dynamo import run_launch

pytestmark = pytest.mark.slow
JUDGED = ("refresh.served_policy_verified", "refresh.post_update_generation")


@pytest.fixture(scope="module")
def vllm_bf16(vllm_python: Path) -> Iterator[Target]:
    launcher = DynamoLauncher("vllm-bf16", python=vllm_python)
    try:
        yield launcher.start()
    finally:
        launcher.stop()


@pytest.fixture(scope="module")
def sglang_bf16(sglang_python: Path) -> Iterator[Target]:
    launcher = DynamoLauncher("sglang-bf16", python=sglang_python)
    try:
        yield launcher.start()
    finally:
        launcher.stop()


def by_url(directory: Path, target: Target, reference_python: Path) -> dict[str, Any]:
    """A mutating run by URL on every worker, judging the refresh rows that read the weights."""
    arguments = [
        "--frontend",
        target.frontend_url,
        "--backend",
        target.backend,
        "--allow-mutations",
        "--all-workers",
        "--reference-python",
        str(reference_python),
    ]
    if target.rl_url:
        arguments += ["--rl-url", target.rl_url]
    for url in target.worker_urls:
        arguments += ["--worker-url", url]
    for path in target.update_model_paths:
        arguments += ["--update-model-path", path]
    for capability in JUDGED:
        arguments += ["--capability", capability]
    return run_launch(directory, *arguments, timeout_s=900)


def outcomes(matrix: dict[str, Any]) -> dict[str, tuple[str, str]]:
    (target,) = matrix["targets"]
    return {
        row["id"]: (row["cells"][target["id"]]["outcome"], row["cells"][target["id"]]["reason"])
        for row in matrix["capabilities"]
    }


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_bfloat16_updates_serve_the_checkpoint_sent(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The engine's own environment has torch and transformers: the reference Python."""
    target: Target = request.getfixturevalue(f"{engine}_bf16")
    python: Path = request.getfixturevalue(f"{engine}_python")
    assert len(target.update_model_paths) == 2
    matrix = by_url(tmp_path, target, python)
    found = outcomes(matrix)
    assert {row: found[row][0] for row in JUDGED} == dict.fromkeys(JUDGED, "pass"), (
        found,
        matrix["stdout"][-3000:],
    )
    assert matrix["complete"]
