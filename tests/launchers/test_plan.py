"""Turning flags into launchers: clear errors for contradictory flags, the right launcher kinds."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_conformance.errors import ConfigurationError
from rl_conformance.launchers import ExternalLauncher, FakeLauncher
from rl_conformance.launchers.docker import DockerLauncher
from rl_conformance.launchers.dynamo import DynamoLauncher
from rl_conformance.launchers.run_plan import plan_run
from rl_conformance.model.config import RunConfig

ROOT = Path(__file__).resolve().parents[2]


def plan(**options: object) -> list[object]:
    return list(plan_run(RunConfig(**options)).pool.launchers.values())  # type: ignore[arg-type]


def test_default_is_the_four_fakes() -> None:
    launchers = plan()
    assert [type(launcher) for launcher in launchers] == [FakeLauncher] * 4
    assert [launcher.target_id for launcher in launchers] == [
        "fake-vllm",
        "fake-sglang",
        "fake-trtllm",
        "fake-vllm-sidecar",
    ]
    sidecar = launchers[3]
    assert isinstance(sidecar, FakeLauncher) and sidecar.backend == "vllm"
    assert sidecar.command()[3:6] == ["vllm", "--admin-family", "sidecar"]


def test_external_release_is_the_users_or_main() -> None:
    (default,) = plan(frontend="http://127.0.0.1:1", backend="vllm")
    assert isinstance(default, ExternalLauncher) and default.start().release == "main"
    (given,) = plan(frontend="http://127.0.0.1:1", backend="vllm", dynamo_release="1.6.1")
    assert isinstance(given, ExternalLauncher) and given.start().release == "1.6.1"
    with pytest.raises(ConfigurationError, match="--dynamo-release"):
        plan(dynamo_release="1.6.1")


def test_external_deployment_replaces_the_fakes() -> None:
    launchers = plan(frontend="http://127.0.0.1:1", backend="sglang")
    assert len(launchers) == 1 and isinstance(launchers[0], ExternalLauncher)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"frontend": "http://127.0.0.1:1"}, "--frontend needs --backend"),
        ({"rl_url": "http://127.0.0.1:2"}, "give --frontend URL too"),
        ({"frontend": "ftp://x", "backend": "vllm"}, r"expected an http\(s\) URL"),
        (
            {"frontend": "http://127.0.0.1:1", "backend": "tgi"},
            "expected one of vllm, sglang, trtllm",
        ),
        (
            {"engine_fault": ("x",)},
            "--engine-fault needs --launch dynamo-fake-vllm or dynamo-fake-sglang",
        ),
        ({"launch": "docker"}, "--launch docker needs --docker-config"),
        ({"launch": "kubernetes"}, "--launch: expected one of"),
    ],
)
def test_contradictory_flags_are_rejected_with_the_fix(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        plan(**options)


def test_launch_kinds_give_their_launchers() -> None:
    [mocker] = plan(launch="dynamo-mocker")
    assert isinstance(mocker, DynamoLauncher) and mocker.target_id == "dynamo-mocker"
    [engine] = plan(launch="dynamo-fake-vllm", engine_fault=("usage_lies",))
    assert isinstance(engine, DynamoLauncher) and engine.engine_faults == ("usage_lies",)
    [docker] = plan(launch="docker", docker_config=str(ROOT / "deploy/docker/vllm-agg.json"))
    assert isinstance(docker, DockerLauncher)
