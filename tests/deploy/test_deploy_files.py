"""deploy/ is held by real tools: the nightly workflow audited by zizmor (no finding above low)
and checked against GitHub's workflow schema, the Kubernetes Job validated against the
Kubernetes API schemas, the Docker config read by the launcher; and every `rl-conformance` flag
either file passes is one the CLI still has, so a renamed flag fails here, not at 03:17."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rl_conformance.cli import build_parser
from rl_conformance.launchers.docker import DockerDeployment

ROOT = Path(__file__).resolve().parents[2]
NIGHTLY = ROOT / "deploy" / "github-actions" / "nightly.yml"
CRONJOB = ROOT / "deploy" / "kubernetes" / "conformance-cronjob.yaml"
DOCKER_CONFIG = ROOT / "deploy" / "docker" / "vllm-agg.json"
BIN = Path(sys.executable).parent
ABOVE_LOW = {"Medium", "High"}


def _tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is a dev dependency (pip install -e '.[dev]')"
    return str(path)


def test_the_nightly_workflow_has_no_zizmor_finding_above_low() -> None:
    done = subprocess.run(
        [_tool("zizmor"), "--offline", "--format", "json", str(NIGHTLY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    findings = json.loads(done.stdout or "[]")
    serious = [
        f"{f['ident']} ({f['determinations']['severity']}): {f['desc']}"
        for f in findings
        if f["determinations"]["severity"] in ABOVE_LOW
    ]
    assert serious == [], done.stderr[-2000:]


def test_the_nightly_workflow_is_a_valid_github_workflow() -> None:
    done = subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(NIGHTLY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_kubernetes_cronjob_is_valid_against_the_api_schemas() -> None:
    done = subprocess.run(
        [_tool("kubernetes-validate"), "--strict", str(CRONJOB)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed for resource cronjob/rl-conformance" in done.stdout + done.stderr


def _subcommands() -> dict[str, set[str]]:
    parser = build_parser()
    choices = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
    return {
        name: set(sub._option_string_actions)
        for name, sub in choices.choices.items()  # type: ignore[union-attr]
    }


def unknown_flags(argv: list[str]) -> list[str]:
    """The flags of one `rl-conformance SUBCOMMAND ...` argument vector the CLI does not know."""
    known = _subcommands()
    if len(argv) < 2 or argv[1] not in known:
        return [f"subcommand {argv[1:2]}"]
    flags = [token.split("=", 1)[0] for token in argv[2:] if token.startswith("--")]
    return [flag for flag in flags if flag not in known[argv[1]]]


def _invocations(script: str) -> Iterator[list[str]]:
    """Each `rl-conformance ...` command line of a shell script, continuation lines joined."""
    for line in re.sub(r"\\\n\s*", " ", script).splitlines():
        if "rl-conformance " not in line or line.lstrip().startswith(("echo", "#")):
            continue
        command = line.split("|")[0].split("2>&1")[0]
        argv = shlex.split(command)
        start = next(i for i, t in enumerate(argv) if t.endswith("rl-conformance"))
        yield ["rl-conformance", *argv[start + 1 :]]


def _workflow_invocations() -> Iterator[list[str]]:
    workflow = yaml.safe_load(NIGHTLY.read_text())
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            yield from _invocations(step.get("run", ""))


def _cronjob() -> dict[str, Any]:
    documents = list(yaml.safe_load_all(CRONJOB.read_text()))
    found: dict[str, Any] = next(d for d in documents if d and d["kind"] == "CronJob")
    return found


def _cronjob_invocations() -> list[list[str]]:
    pod = _cronjob()["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return list(_invocations(pod["containers"][0]["command"][2]))


def _job_command() -> list[str]:
    return next(argv for argv in _cronjob_invocations() if argv[1] == "run")


def test_every_flag_the_deploy_files_pass_still_exists() -> None:
    invocations = [*_workflow_invocations(), *_cronjob_invocations()]
    assert len(invocations) >= 4  # the nightly's run and baseline, the CronJob's likewise
    for argv in invocations:
        assert unknown_flags(argv) == [], argv


def test_a_flag_the_cli_no_longer_has_is_caught() -> None:
    assert unknown_flags(["rl-conformance", "run", "--report-dir", "x", "--max-examples", "3"]) == [
        "--max-examples"
    ]
    assert unknown_flags(["rl-conformance", "nightly"]) == ["subcommand ['nightly']"]


def _run_flags(argv: list[str]) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for index, token in enumerate(argv):
        if token.startswith("--"):
            following = argv[index + 1] if index + 1 < len(argv) else None
            flags[token] = None if following is None or following.startswith("--") else following
    return flags


def test_the_runs_declare_their_release_and_bound_themselves() -> None:
    runs = [argv for argv in _workflow_invocations() if argv[1] == "run"]
    runs.append(_job_command())
    for argv in runs:
        flags = _run_flags(argv)
        assert float(flags["--run-timeout"]) > 0 and int(flags["--budget-generations"]) > 0
    job = _run_flags(_job_command())
    assert job["--dynamo-release"] == "1.6.1"
    deadline = _cronjob()["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"]
    assert float(job["--run-timeout"]) < deadline  # the report is written before the kill
    deployment = DockerDeployment.from_file(DOCKER_CONFIG)
    images = {spec.image for spec in deployment.containers if "dynamo" in spec.image}
    assert deployment.dynamo_release is not None
    assert all(image.endswith(f":{deployment.dynamo_release}") for image in images), images


@pytest.mark.parametrize("value", ["", 161])
def test_a_bad_declared_release_is_named(tmp_path: Path, value: Any) -> None:
    from rl_conformance.errors import ConfigurationError

    document = json.loads(DOCKER_CONFIG.read_text())
    document["dynamo_release"] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigurationError, match="dynamo_release: expected a Dynamo release"):
        DockerDeployment.from_file(path)
