"""`DockerLauncher` against a fake Docker engine: the exact engine calls, readiness and its
deadline, start-up failures with their log tails, and teardown that removes exactly what the run
created. (A deployment file's own errors: `test_docker_deployment_file`.)"""

from __future__ import annotations

import copy
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.errors import LaunchError
from rl_conformance.launchers.docker import (
    JOB_LABEL,
    RUN_LABEL,
    ContainerSpec,
    DockerDeployment,
    DockerLauncher,
    device_requests,
    launcher_from_config,
)

from .docker_deployment_base import BASE, FRONTEND_COMMAND, RUNTIME, WORKER_COMMAND
from .fake_docker_engine import FakeDockerEngine
from .fake_docker_objects import ContainerScript
from .stub_frontend import StubFrontend

RUN = "run1"


def config(**changes: Any) -> dict[str, Any]:
    """BASE with top-level keys replaced; `readiness` changes are merged."""
    data = copy.deepcopy(BASE)
    for key, value in changes.items():
        if key == "readiness":
            data["readiness"].update(value)
        else:
            data[key] = value
    return data


@pytest.fixture
def engine() -> Iterator[FakeDockerEngine]:
    with FakeDockerEngine() as fake:
        fake.add_image(RUNTIME, cmd=["/opt/nvidia/nvidia_entrypoint.sh"])
        yield fake


@pytest.fixture
def frontend(engine: FakeDockerEngine) -> Iterator[StubFrontend]:
    """The frontend container's ports 8000 and 8001 land on a live loopback stub."""
    with StubFrontend("toy") as stub:
        engine.script(
            "frontend",
            ContainerScript(
                log_lines=("frontend: listening on 0.0.0.0:8000",),
                host_ports={8000: stub.port, 8001: stub.port},
            ),
        )
        yield stub


def launcher(
    engine: FakeDockerEngine,
    tmp_path: Path,
    data: dict[str, Any] | None = None,
    *,
    job: str | None = "",
) -> DockerLauncher:
    """A launcher on the fake engine with a fixed run id; `job=None` reads the environment."""
    deployment = DockerDeployment.from_dict(data or config(), source="test.json")
    return DockerLauncher(
        deployment, base_url=engine.base_url, log_dir=tmp_path / "logs", run_id=RUN, job=job
    )


def created_ids(engine: FakeDockerEngine) -> list[str]:
    return [c.id for c in engine.containers.values() if c.labels.get(RUN_LABEL) == RUN]


def touched_containers(engine: FakeDockerEngine) -> set[str]:
    """Containers the launcher changed: started, stopped or removed."""
    touched = set()
    for call in engine.calls:
        match = re.fullmatch(r"/containers/([0-9a-f]{64})(/start|/stop)?", call.path)
        if match and call.method in ("POST", "DELETE"):
            touched.add(match.group(1))
    return touched


# -- start: the calls made --------------------------------------------------------------------


def test_containers_are_created_with_image_command_env_labels_gpus_and_loopback_ports(
    engine: FakeDockerEngine, frontend: StubFrontend, tmp_path: Path
) -> None:
    docker_launcher = launcher(engine, tmp_path)
    docker_launcher.start()
    try:
        network = engine.calls_to("POST", "/networks/create")
        assert [call.body["Name"] for call in network] == ["nightly-run1"]
        assert network[0].body["Labels"][RUN_LABEL] == RUN
        creates = engine.calls_to("POST", "/containers/create")
        assert [call.param("name") for call in creates] == [
            "nightly-run1-frontend",
            "nightly-run1-worker",
        ]
        front, worker = (call.body for call in creates)
        assert front["Image"] == worker["Image"] == RUNTIME
        assert front["Cmd"] == FRONTEND_COMMAND
        assert worker["Cmd"] == WORKER_COMMAND
        assert sorted(front["Env"]) == ["DYN_ENABLE_RL=true", "DYN_RL_PORT=8001"]
        assert worker["Env"] == ["DYN_SYSTEM_PORT=8081"]
        assert front["Labels"] == {
            RUN_LABEL: RUN,
            "dynamo-rl-conformance.deployment": "nightly",
            "dynamo-rl-conformance.container": "frontend",
        }
        assert front["HostConfig"]["PortBindings"] == {
            "8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}],
            "8001/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}],
        }
        assert "DeviceRequests" not in front["HostConfig"]
        assert worker["HostConfig"]["DeviceRequests"] == [
            {"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}
        ]
        assert "PortBindings" not in worker["HostConfig"]
        for body, alias in ((front, "frontend"), (worker, "worker")):
            assert body["HostConfig"]["NetworkMode"] == "nightly-run1"
            assert body["NetworkingConfig"]["EndpointsConfig"]["nightly-run1"] == {
                "Aliases": [alias]
            }
        started = [call.path for call in engine.calls if call.path.endswith("/start")]
        assert started == [f"/containers/{cid}/start" for cid in created_ids(engine)]
    finally:
        docker_launcher.stop()


def test_the_ci_job_label_comes_from_the_environment(
    engine: FakeDockerEngine,
    frontend: StubFrontend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RL_CONFORMANCE_JOB", "gh-123-1")
    docker_launcher = launcher(engine, tmp_path, job=None)
    docker_launcher.start()
    docker_launcher.stop()
    bodies = [c.body for c in engine.calls_to("POST", "/(networks|containers)/create")]
    assert [body["Labels"][JOB_LABEL] for body in bodies] == ["gh-123-1"] * 3


@pytest.mark.parametrize(
    ("gpus", "request_json"),
    [
        ("all", {"Count": -1, "DeviceIDs": []}),
        (2, {"Count": 2, "DeviceIDs": []}),
        (["0", 3], {"Count": 0, "DeviceIDs": ["0", "3"]}),
    ],
)
def test_gpus_forms_become_one_gpu_device_request(gpus: Any, request_json: dict[str, Any]) -> None:
    data = config()
    data["containers"][1]["gpus"] = gpus
    spec = DockerDeployment.from_dict(data).container("worker")
    assert [dict(r) for r in device_requests(spec)] == [
        {"Driver": "", "Capabilities": [["gpu"]], "Options": {}, **request_json}
    ]


def test_images_are_pulled_only_when_asked(
    engine: FakeDockerEngine, frontend: StubFrontend, tmp_path: Path
) -> None:
    docker_launcher = launcher(engine, tmp_path)
    docker_launcher.start()
    docker_launcher.stop()
    assert engine.calls_to("POST", "/images/create") == []
    assert len(engine.calls_to("GET", "/images/.+/json")) == 1  # one inspect per distinct image

    engine.add_image("registry.local:5000/team/dynamo:nightly", local=False)
    data = config(pull=True)
    for container in data["containers"]:
        container["image"] = "registry.local:5000/team/dynamo:nightly"
    pulling = launcher(engine, tmp_path, data)
    pulling.run_id = "run2"
    target = pulling.start()
    pulling.stop()
    pulls = engine.calls_to("POST", "/images/create")
    assert [(c.param("fromImage"), c.param("tag")) for c in pulls] == [
        ("registry.local:5000/team/dynamo", "nightly")
    ]
    assert target.versions["worker.image_digest"].startswith("registry.local:5000/team/dynamo@")


def test_a_missing_image_without_pull_is_a_launch_error_that_names_it(
    engine: FakeDockerEngine, tmp_path: Path
) -> None:
    data = config()
    data["containers"][1]["image"] = "nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.6.1"
    with pytest.raises(LaunchError, match=r"sglang-runtime:1\.6\.1 \(container worker\).*pull"):
        launcher(engine, tmp_path, data).start()
    assert engine.calls_to("POST", "/containers/create") == []


def test_host_ip_is_configurable_and_wildcard_binds_are_reached_on_loopback(
    engine: FakeDockerEngine, frontend: StubFrontend, tmp_path: Path
) -> None:
    docker_launcher = launcher(engine, tmp_path, config(host_ip="0.0.0.0"))
    target = docker_launcher.start()
    docker_launcher.stop()
    body = engine.calls_to("POST", "/containers/create")[0].body
    assert body["HostConfig"]["PortBindings"]["8000/tcp"] == [{"HostIp": "0.0.0.0", "HostPort": ""}]
    assert target.frontend_url == f"http://127.0.0.1:{frontend.port}"


def test_a_host_network_container_is_reached_on_its_own_port(
    engine: FakeDockerEngine, frontend: StubFrontend, tmp_path: Path
) -> None:
    data = config(
        frontend={"container": "frontend", "port": frontend.port},
        rl={"container": "frontend", "port": frontend.port},
    )
    data["containers"][0]["network"] = "host"
    del data["containers"][0]["ports"]
    docker_launcher = launcher(engine, tmp_path, data)
    target = docker_launcher.start()
    docker_launcher.stop()
    front, worker = (c.body for c in engine.calls_to("POST", "/containers/create"))
    assert front["HostConfig"]["NetworkMode"] == "host"
    assert "PortBindings" not in front["HostConfig"]
    assert worker["HostConfig"]["NetworkMode"] == "nightly-run1"
    assert target.frontend_url == target.rl_url == f"http://127.0.0.1:{frontend.port}"


# -- readiness ------------------------------------------------------------------------------------


def test_start_waits_until_the_model_and_rl_workers_are_listed(
    engine: FakeDockerEngine, frontend: StubFrontend, tmp_path: Path
) -> None:
    frontend.ready_after = 3
    docker_launcher = launcher(engine, tmp_path, config(readiness={"rl_workers": 1}))
    target = docker_launcher.start()
    try:
        # Each path answers empty three times: models gate first, then the RL workers.
        assert frontend.requests.count("/v1/models") == 4 + 3
        assert frontend.requests.count("/v1/rl/workers") == 4
        assert target.id == "nightly"
        assert target.kind == "docker"
        assert target.backend == "vllm"
        assert target.model == "toy"
        assert target.frontend_url == f"http://127.0.0.1:{frontend.port}"
        assert target.rl_url == f"http://127.0.0.1:{frontend.port}"
        assert target.versions["docker.engine"] == "26.1.4"
        assert target.versions["worker.image"] == RUNTIME
        assert target.versions["worker.image_id"].startswith("sha256:")
        assert target.versions["worker.image_digest"].startswith(
            "nvcr.io/nvidia/ai-dynamo/vllm-runtime@sha256:"
        )
        assert any(
            "nightly-run1-worker --gpus all" in note and " ".join(WORKER_COMMAND) in note
            for note in target.notes
        )
        assert any(str(tmp_path / "logs") in note for note in target.notes)
    finally:
        docker_launcher.stop()


def test_a_never_ready_deployment_fails_within_its_deadline_quoting_the_log_tail(
    engine: FakeDockerEngine, frontend: StubFrontend, tmp_path: Path
) -> None:
    frontend.ready = False
    engine.script("worker", ContainerScript(log_lines=("INFO loading weights 0%", "still loading")))
    docker_launcher = launcher(engine, tmp_path, config(readiness={"deadline_s": 1}))
    began = time.monotonic()
    with pytest.raises(LaunchError) as failure:
        docker_launcher.start()
    assert time.monotonic() - began < 1 + 2
    message = str(failure.value)
    assert "not ready within 1 s" in message
    assert "lists models []" in message
    assert "INFO loading weights 0%\nstill loading" in message
    assert "frontend: listening on 0.0.0.0:8000" in message
    assert created_ids(engine) == []  # torn down by start() itself


def test_a_container_that_exits_during_start_up_fails_the_launch_with_its_logs(
    engine: FakeDockerEngine, frontend: StubFrontend, tmp_path: Path
) -> None:
    frontend.ready = False
    engine.script(
        "worker",
        ContainerScript(
            log_lines=("INFO starting vLLM",),
            stderr_lines=("RuntimeError: No CUDA GPUs are available",),
            exit_code=1,
            exit_after_s=0.3,
        ),
    )
    began = time.monotonic()
    with pytest.raises(LaunchError) as failure:
        launcher(engine, tmp_path).start()
    assert time.monotonic() - began < 2  # well before the 5 s deadline
    message = str(failure.value)
    assert "container worker (nightly-run1-worker) exited with code 1 during start-up" in message
    assert "RuntimeError: No CUDA GPUs are available" in message
    saved = (tmp_path / "logs" / "nightly-run1-worker.log").read_text()
    assert "INFO starting vLLM" in saved
    assert "No CUDA GPUs" in saved


# -- teardown ---------------------------------------------------------------------------------


def test_stop_removes_exactly_the_containers_and_network_it_created(
    engine: FakeDockerEngine, frontend: StubFrontend, tmp_path: Path
) -> None:
    other = engine.add_container("nightly-other-frontend", RUNTIME, {RUN_LABEL: "other"})
    stranger = engine.add_container("postgres", RUNTIME, {})
    other_network = engine.add_network("nightly-other", {RUN_LABEL: "other"})
    docker_launcher = launcher(engine, tmp_path)
    docker_launcher.start()
    ours = created_ids(engine)
    ours_network = next(n["Id"] for n in engine.networks.values() if n["Name"] == "nightly-run1")
    before = len(engine.calls)

    docker_launcher.stop()

    teardown = engine.calls[before:]
    stops = [c.path for c in teardown if c.method == "POST" and c.path.endswith("/stop")]
    removals = [c.path for c in teardown if c.method == "DELETE"]
    assert stops == [f"/containers/{cid}/stop" for cid in reversed(ours)]
    assert removals == [f"/containers/{cid}" for cid in reversed(ours)] + [
        f"/networks/{ours_network}"
    ]
    for removal in engine.calls_to("DELETE", "/containers/.*"):
        assert removal.param("force") == "True"
    assert touched_containers(engine) == set(ours)
    assert set(engine.containers) == {other, stranger}
    assert set(engine.networks) == {other_network}
    listed = [c.filters() for c in teardown if c.path in ("/containers/json", "/networks")]
    assert listed == [{"label": [f"{RUN_LABEL}={RUN}"]}] * 2
    logs = tmp_path / "logs"
    assert "listening on 0.0.0.0:8000" in (logs / "nightly-run1-frontend.log").read_text()
    assert sorted(docker_launcher.log_paths) == ["nightly-run1-frontend", "nightly-run1-worker"]


def test_stop_is_idempotent(
    engine: FakeDockerEngine, frontend: StubFrontend, tmp_path: Path
) -> None:
    docker_launcher = launcher(engine, tmp_path)
    docker_launcher.stop()  # before start: nothing to do, no engine contacted
    assert engine.calls == []
    docker_launcher.start()
    docker_launcher.stop()
    calls = len(engine.calls)
    docker_launcher.stop()
    assert len(engine.calls) == calls


def test_a_name_collision_fails_the_start_and_never_touches_the_other_container(
    engine: FakeDockerEngine, frontend: StubFrontend, tmp_path: Path
) -> None:
    squatter = engine.add_container("nightly-run1-worker", RUNTIME, {RUN_LABEL: "someone"})
    docker_launcher = launcher(engine, tmp_path)
    with pytest.raises(LaunchError, match="Conflict"):
        docker_launcher.start()
    assert set(engine.containers) == {squatter}
    assert engine.containers[squatter].status() == "running"
    assert squatter not in touched_containers(engine)
    assert engine.networks == {}
    calls = len(engine.calls)
    docker_launcher.stop()  # after a failed start: nothing left, nothing raised
    assert len(engine.calls) == calls


def test_stop_after_a_failed_start_removes_what_start_could_not(
    engine: FakeDockerEngine,
    frontend: StubFrontend,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The engine becomes unreachable while readiness is awaited: start() fails, its own
    teardown cannot reach the engine either and only logs; a later stop() finishes the job."""
    frontend.ready = False
    hidden = engine.socket_path.with_name("moved.sock")

    def hide_engine(path: str) -> None:
        if engine.socket_path.exists():
            engine.socket_path.rename(hidden)

    frontend.on_request = hide_engine
    docker_launcher = launcher(engine, tmp_path)
    with caplog.at_level(logging.WARNING), pytest.raises(LaunchError, match="Docker engine"):
        docker_launcher.start()
    assert any("could not" in record.getMessage() for record in caplog.records)
    assert len(created_ids(engine)) == 2
    frontend.on_request = None
    hidden.rename(engine.socket_path)
    docker_launcher.stop()
    assert created_ids(engine) == []
    assert engine.networks == {}


def test_stop_logs_what_it_cannot_remove_and_retries_later(
    engine: FakeDockerEngine,
    frontend: StubFrontend,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    docker_launcher = launcher(engine, tmp_path)
    docker_launcher.start()
    socket_path = engine.socket_path
    hidden = socket_path.with_name("moved.sock")
    socket_path.rename(hidden)  # the engine is unreachable for a moment
    with caplog.at_level(logging.WARNING):
        docker_launcher.stop()
    assert any("could not" in record.getMessage() for record in caplog.records)
    assert len(created_ids(engine)) == 2
    hidden.rename(socket_path)
    docker_launcher.stop()
    assert created_ids(engine) == []
    assert engine.networks == {}


def test_an_unreachable_engine_is_a_launch_error(tmp_path: Path) -> None:
    deployment = DockerDeployment.from_dict(config())
    docker_launcher = DockerLauncher(
        deployment, base_url=f"unix://{tmp_path}/absent.sock", log_dir=tmp_path / "logs"
    )
    with pytest.raises(LaunchError, match="cannot reach"):
        docker_launcher.start()
    docker_launcher.stop()


def test_launcher_from_config_validates_the_file_without_contacting_the_engine(
    engine: FakeDockerEngine, tmp_path: Path
) -> None:
    path = tmp_path / "deployment.json"
    path.write_text(json.dumps(config()))
    made = launcher_from_config(str(path))
    assert (made.target_id, made.backend) == ("nightly", "vllm")
    assert made.deployment.containers[1] == ContainerSpec(
        name="worker",
        image=RUNTIME,
        command=tuple(WORKER_COMMAND),
        environment={"DYN_SYSTEM_PORT": "8081"},
        gpus="all",
    )
    assert engine.calls == []
