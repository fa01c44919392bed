"""A mutating run by URL leaves a REAL worker on the weights it found: vLLM 0.31.0 (CPU build)
behind the real Dynamo 1.6.1 frontend and RL listener (`DynamoLauncher`, started by the test,
reached by URL as a user's fleet is), two `--update-model-path` checkpoints made locally; after
the run, its worker answers a pinned greedy probe as it did before the run (matrix.json
`fleet_restore`: reloaded from `--restore-model-path`, the checkpoint the worker was started on,
as its operator knows it: discovery names the served model, not its path; verified within the
served-policy tolerance)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rl_conformance.launchers.dynamo import DynamoLauncher
from rl_conformance.model.target import Target

from .test_real_dynamo import run_launch

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def deployment(vllm_python: Path) -> Iterator[tuple[Target, str]]:
    launcher = DynamoLauncher("vllm", python=vllm_python)
    try:
        target = launcher.start()
        assert launcher.served_path is not None
        yield target, launcher.served_path
    finally:
        launcher.stop()


def test_a_real_worker_serves_its_original_weights_after_a_mutating_run(
    deployment: tuple[Target, str], vllm_python: Path, tmp_path: Path
) -> None:
    target, served_path = deployment
    assert target.rl_url is not None
    arguments = ["--backend", "vllm", "--allow-mutations", "--all-workers"]
    arguments += ["--restore-model-path", served_path]
    arguments += ["--reference-python", str(vllm_python)]
    for path in target.update_model_paths:
        arguments += ["--update-model-path", path]
    assert len(target.update_model_paths) == 2
    matrix = run_launch(
        tmp_path / "report",
        "--frontend",
        target.frontend_url,
        "--rl-url",
        target.rl_url,
        "--capability",
        "refresh.served_policy_verified",
        *arguments,
        timeout_s=1200,
    )
    restored = matrix.get("fleet_restore")
    assert restored, matrix["stdout"][-3000:]
    assert all(worker["restored"] and worker["verified"] for worker in restored), [
        (worker["actions"], worker["problems"], worker["verification"]) for worker in restored
    ]
    assert all(
        any(action.startswith("reloaded") for action in worker["actions"]) for worker in restored
    ), restored
    assert matrix["exit_status"] == 0, matrix["stdout"][-3000:]
