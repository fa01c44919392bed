"""`--launch docker` against a real Docker daemon (tests/launchers/real_docker.py): our fake
backends built into an image offline, started by the launcher with host networking on loopback,
judged by the whole suite, and the matrix equal to the one the same fake gets as a plain process
reached by URL. The launcher's failure paths (image missing, container exiting at once, port
taken, daemon unreachable, run cut short by its timeout or interrupted) each end in a clear error
naming the cause, with nothing left on the daemon."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.launchers.docker import RUN_LABEL

from .real_docker import (
    FAKES_IMAGE,
    Daemon,
    build_fakes_image,
    can_run_containers,
    ensure_base_image,
    free_ports,
    labelled,
    running_daemon,
)

pytestmark = pytest.mark.slow
CHECKPOINTS = ("--update-model-path", "/checkpoints/a", "--update-model-path", "/checkpoints/b")
RUN_S = 600


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with running_daemon() as started:
        client = started.client()
        try:
            ensure_base_image(client)
            can_run_containers(client, started)
            build_fakes_image(client)
        finally:
            client.close()
        yield started


def _fake_arguments(frontend: int, rl: int) -> list[str]:
    """`python -m fake_backends` arguments: a vLLM fake of two workers on these loopback ports."""
    ports = ["--port", str(frontend), "--rl-port", str(rl), "--control-port", "0"]
    return ["vllm", "--host", "127.0.0.1", *ports, "--workers", "2"]


def _config(directory: Path, ports: list[int], **changes: Any) -> Path:
    frontend, rl = ports
    document: dict[str, Any] = {
        "name": "fakes-vllm",
        "backend": "vllm",
        "model": "toy",
        "containers": [
            {
                "name": "fake",
                "image": FAKES_IMAGE,
                "command": _fake_arguments(frontend, rl),
                "network": "host",
            }
        ],
        "frontend": {"container": "fake", "port": frontend},
        "rl": {"container": "fake", "port": rl},
        "readiness": {"rl_workers": 2, "deadline_s": 60, "interval_s": 0.5},
        "stop_timeout_s": 5,
    }
    for key, value in changes.items():
        if key == "container":
            document["containers"][0].update(value)
        else:
            document[key] = value
    path = directory / "docker-config.json"
    path.write_text(json.dumps(document))
    return path


def _launched(config: Path) -> tuple[str, ...]:
    """The flags of a mutating run on the deployment `config` describes."""
    return (
        "--launch",
        "docker",
        "--docker-config",
        str(config),
        "--allow-mutations",
        "--all-workers",
    )


def _argv(directory: Path, *arguments: str) -> list[str]:
    """`rl-conformance run -q --report-dir DIRECTORY ARGUMENTS...`"""
    return [
        sys.executable,
        "-m",
        "rl_conformance",
        "run",
        "-q",
        "--report-dir",
        str(directory),
        *arguments,
    ]


def _run(daemon_host: str, directory: Path, *arguments: str, timeout: float = RUN_S) -> Any:
    return subprocess.run(
        _argv(directory, *arguments),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "DOCKER_HOST": daemon_host},
        check=False,
    )


def _cells(directory: Path) -> dict[str, tuple[str, str]]:
    matrix = json.loads((directory / "matrix.json").read_text())
    (target,) = matrix["targets"]
    return {
        row["id"]: (row["cells"][target["id"]]["outcome"], row["cells"][target["id"]]["reason"])
        for row in matrix["capabilities"]
    }


def _nothing_left(daemon: Daemon) -> None:
    client = daemon.client()
    try:
        assert labelled(client, RUN_LABEL) == ([], [])
    finally:
        client.close()


def test_containerized_fakes_get_the_matrix_they_get_as_a_process(
    daemon: Daemon, tmp_path: Path
) -> None:
    docker_report = tmp_path / "docker"
    done = _run(
        daemon.host,
        docker_report,
        *_launched(_config(tmp_path, free_ports(2))),
        *CHECKPOINTS,
    )
    assert (docker_report / "matrix.json").exists(), done.stdout[-2000:] + done.stderr[-3000:]
    _nothing_left(daemon)
    frontend, rl = free_ports(2)
    process = subprocess.Popen(
        [sys.executable, "-m", "fake_backends", *_fake_arguments(frontend, rl)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        process.stdout.readline()  # ready
        url_report = tmp_path / "url"
        _run(
            daemon.host,
            url_report,
            "--frontend",
            f"http://127.0.0.1:{frontend}",
            "--rl-url",
            f"http://127.0.0.1:{rl}",
            "--backend",
            "vllm",
            "--model",
            "toy",
            "--allow-mutations",
            "--all-workers",
            *CHECKPOINTS,
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
    in_docker, by_url = _cells(docker_report), _cells(url_report)
    assert set(in_docker) == set(by_url)
    differing = {
        capability: (in_docker[capability], by_url[capability])
        for capability in in_docker
        if in_docker[capability][0] != by_url[capability][0]
    }
    assert differing == {}
    outcomes = {outcome for outcome, _ in in_docker.values()}
    assert "pass" in outcomes and not outcomes & {"fail", "error"}
    matrix = json.loads((docker_report / "matrix.json").read_text())
    (target,) = matrix["targets"]
    assert target["kind"] == "docker"
    assert target["versions"]["fake.image"] == FAKES_IMAGE


def _failed_launch(host: str, tmp_path: Path, config: Path) -> str:
    """What the user is told of a launch that fails: the output, and the report's target notes
    (every cell `error`, its reason the launcher's)."""
    report = tmp_path / "r"
    done = _run(host, report, "--launch", "docker", "--docker-config", str(config))
    assert done.returncode != 0, done.stdout[-2000:]
    told = done.stdout + done.stderr
    if (report / "matrix.json").exists():
        matrix = json.loads((report / "matrix.json").read_text())
        told += "\n".join(note for target in matrix["targets"] for note in target["notes"])
        outcomes = {c["outcome"] for row in matrix["capabilities"] for c in row["cells"].values()}
        assert outcomes == {"error"}, outcomes
    return told


def test_a_missing_image_is_named(daemon: Daemon, tmp_path: Path) -> None:
    config = _config(tmp_path, free_ports(2), container={"image": "rl-conformance-absent:none"})
    told = _failed_launch(daemon.host, tmp_path, config)
    assert "image rl-conformance-absent:none" in told and "is not on the Docker host" in told
    _nothing_left(daemon)


def test_a_container_exiting_at_once_is_named_with_its_log(daemon: Daemon, tmp_path: Path) -> None:
    config = _config(tmp_path, free_ports(2), container={"command": ["vllm", "--no-such-flag"]})
    told = _failed_launch(daemon.host, tmp_path, config)
    assert "container fake" in told and "exited with code 2" in told
    assert "unrecognized arguments: --no-such-flag" in told  # its own complaint, from its log
    _nothing_left(daemon)


def test_a_port_already_taken_is_named(daemon: Daemon, tmp_path: Path) -> None:
    ports = free_ports(2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports[0]))
        taken.listen(1)
        told = _failed_launch(daemon.host, tmp_path, _config(tmp_path, ports))
    assert "container fake" in told
    assert "address already in use" in told.lower()
    _nothing_left(daemon)


def test_an_unreachable_daemon_is_named(tmp_path: Path) -> None:
    host = f"unix://{tmp_path}/no-daemon.sock"
    told = _failed_launch(host, tmp_path, _config(tmp_path, free_ports(2)))
    assert "cannot reach" in told or "Docker engine call failed" in told
    assert "no-daemon.sock" in told


def test_a_run_cut_short_by_its_timeout_leaves_nothing(daemon: Daemon, tmp_path: Path) -> None:
    report = tmp_path / "r"
    done = _run(
        daemon.host,
        report,
        *_launched(_config(tmp_path, free_ports(2))),
        "--run-timeout",
        "4",
    )
    matrix = json.loads((report / "matrix.json").read_text())
    assert matrix["complete"] is False, done.stdout[-1000:]
    _nothing_left(daemon)


def test_an_interrupted_run_leaves_nothing(daemon: Daemon, tmp_path: Path) -> None:
    report = tmp_path / "r"
    config = _config(tmp_path, free_ports(2))
    process = subprocess.Popen(
        _argv(report, *_launched(config)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "DOCKER_HOST": daemon.host},
    )
    client = daemon.client()
    try:
        deadline = time.monotonic() + 60
        while not labelled(client, RUN_LABEL)[0] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert labelled(client, RUN_LABEL)[0], "the launcher started no container"
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) != 0  # interrupted, not finished
    finally:
        if process.poll() is None:
            process.kill()
        client.close()
    _nothing_left(daemon)
    assert (report / "matrix.json").exists()
