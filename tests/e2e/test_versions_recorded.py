"""A deployment reached by URL gets the versions it publishes recorded in `matrix.json`, each with
where it was read, nothing it does not publish, and the user's `--record` facts marked as theirs;
its Dynamo release is said with how it is known (never `--dynamo-release`'s default as a fact);
`matrix.md` says the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.frontend.app import fake_version

pytestmark = pytest.mark.slow


def test_a_deployment_reached_by_url_has_its_versions_and_the_users_records(
    tmp_path: Path,
) -> None:
    with FakeDeployment("vllm") as fleet:
        command = [
            sys.executable, "-m", "rl_conformance", "run", "-q", "--report-dir", str(tmp_path),
            "--frontend", fleet.frontend_url, "--rl-url", fleet.rl_url, "--backend", "vllm",
            "--capability", "tokens.completion_ids",
            "--record", "vllm=0.11.0", "--record", "gpu=H100 80GB",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    (target,) = matrix["targets"]
    assert target["kind"] == "external"
    # What the fake publishes: its OpenAPI document (not Dynamo's title, so not `dynamo`) and
    # the model's owner; no fingerprint, no version label on any /metrics.
    assert target["versions"] == {"frontend.openapi": fake_version(), "model.owned_by": "nvidia"}
    assert target["version_sources"] == {
        "frontend.openapi": "frontend GET /openapi.json info.version (info.title "
        '"fake_backends: a fake Dynamo frontend (dynamo-rl-conformance)")',
        "model.owned_by": 'frontend GET /v1/models data[id="toy"].owned_by',
    }
    assert matrix["recorded"] == {
        "vllm": {"value": "0.11.0", "source": "--record"},
        "gpu": {"value": "H100 80GB", "source": "--record"},
    }
    markdown = (tmp_path / "matrix.md").read_text()
    assert "Recorded by the user (--record, not observed): vllm 0.11.0, gpu H100 80GB." in markdown
    assert (
        f"  - versions: frontend.openapi {fake_version()} [frontend GET /openapi.json" in markdown
    )
    # The fake publishes no Dynamo release, and none was declared: not observed, judged as main.
    assert (target["dynamo_release"], target["dynamo_release_source"]) == ("main", "unknown")
    assert "Dynamo release not observed (judged as main, the default basis)" in markdown
    assert "Dynamo main" not in markdown


def test_a_declared_release_is_reported_as_declared(tmp_path: Path) -> None:
    with FakeDeployment("vllm") as fleet:
        command = [
            sys.executable, "-m", "rl_conformance", "run", "-q", "--report-dir", str(tmp_path),
            "--frontend", fleet.frontend_url, "--rl-url", fleet.rl_url, "--backend", "vllm",
            "--capability", "tokens.completion_ids", "--dynamo-release", "1.6.1",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (target,) = json.loads((tmp_path / "matrix.json").read_text())["targets"]
    assert (target["dynamo_release"], target["dynamo_release_source"]) == (
        "1.6.1",
        "--dynamo-release",
    )
    markdown = (tmp_path / "matrix.md").read_text()
    assert "Dynamo 1.6.1 (declared with --dynamo-release, not observed)" in markdown
