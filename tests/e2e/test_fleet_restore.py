"""A mutating run leaves the fleet as it found it: each worker it changed is resumed and loaded
again with the weights it served before the first mutation, verified by a generation pinned to
it; a worker it cannot put back is the first line of the console and of every report, and the
run exits 4."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fake_backends import FakeDeployment
from rl_conformance.plugin.runner import suites_dir

pytestmark = pytest.mark.slow
FOUND = "/conformance/weights/found"
CHECKPOINTS = (
    "--update-model-path",
    "/conformance/weights/a",
    "--update-model-path",
    "/conformance/weights/b",
)
RESTORING_RUN = ("--capability", "refresh.post_update_generation", "--restore-model-path", FOUND)
"""A mutating run of one refresh row, told the checkpoint the workers were started on."""
PROBE = {"prompt": [640, 1024, 777], "max_tokens": 8, "temperature": 0, "ignore_eos": True}


def finished_run(
    deployment: FakeDeployment, directory: Path, *flags: str
) -> subprocess.CompletedProcess[str]:
    """The mutating run by URL, to its end, with its console."""
    return subprocess.run(
        command(deployment, directory, *flags),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def command(deployment: FakeDeployment, directory: Path, *flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rl_conformance",
        "run",
        "--frontend",
        deployment.frontend_url,
        "--rl-url",
        deployment.rl_url,
        "--backend",
        "vllm",
        "--report-dir",
        str(directory),
        "--examples",
        "2",
        "--allow-mutations",
        "--all-workers",
        *CHECKPOINTS,
        *flags,
    ]


def greedy(deployment: FakeDeployment) -> list[Any]:
    """What a user sees: each worker's greedy answer, pinned to it, and its weight version."""
    import httpx

    workers = httpx.get(f"{deployment.rl_url}/v1/rl/workers").json()["workers"]
    found = []
    for worker in sorted(workers, key=lambda w: w["instance_id"]):
        body = {
            **PROBE,
            "model": deployment.model,
            "nvext": {
                "backend_instance_id": worker["instance_id"],
                "extra_fields": ["completion_token_ids"],
            },
        }
        answer = httpx.post(f"{deployment.frontend_url}/v1/completions", json=body).json()
        version = httpx.post(f"{worker['system_url']}/engine/get_weight_version", json={})
        found.append((answer["nvext"]["completion_token_ids"], version.json()))
    return found


def matrix_of(directory: Path) -> dict[str, Any]:
    return json.loads((directory / "matrix.json").read_text())


def test_a_completed_mutating_run_leaves_each_worker_on_the_weights_it_found(
    tmp_path: Path,
) -> None:
    with FakeDeployment("vllm", workers=2, initial_model_path=FOUND) as fleet:
        before = greedy(fleet)
        run = finished_run(
            fleet,
            tmp_path,
            *RESTORING_RUN,
        )
        after = greedy(fleet)
    matrix = matrix_of(tmp_path)
    restored = matrix["fleet_restore"]
    assert run.returncode == 0, run.stdout[-3000:]
    assert len(restored) == 2
    assert all(worker["restored"] and worker["verified"] for worker in restored), restored
    assert any("reloaded" in " ".join(worker["actions"]) for worker in restored)
    assert [ids for ids, _ in after] == [ids for ids, _ in before]
    assert "the fleet as the run leaves it" in run.stdout
    assert "NOT RESTORED" not in run.stdout


def test_a_worker_whose_restore_does_not_take_is_the_first_line_and_exit_4(
    tmp_path: Path,
) -> None:
    with FakeDeployment(
        "vllm", workers=1, initial_model_path=FOUND, faults=("update_applied_once",)
    ) as fleet:
        run = finished_run(
            fleet,
            tmp_path,
            *RESTORING_RUN,
        )
    matrix = matrix_of(tmp_path)
    assert run.returncode == 4, run.stdout[-3000:]
    assert matrix["exit_status"] == 4
    assert [worker["restored"] for worker in matrix["fleet_restore"]] == [False]
    assert matrix["warnings"][0].startswith("FLEET NOT RESTORED")
    summary = run.stdout.split("conformance matrix", 1)[1].splitlines()
    assert next(line for line in summary if line.strip("= ")).startswith("FLEET NOT RESTORED")
    assert "FLEET NOT RESTORED" in (tmp_path / "matrix.md").read_text().splitlines()[0]
    assert "FLEET NOT RESTORED" in (tmp_path / "matrix.html").read_text()
    assert "FLEET NOT RESTORED" in (tmp_path / "junit.xml").read_text()


def test_without_a_restore_path_a_changed_worker_is_not_restored(tmp_path: Path) -> None:
    """The fake's discovery names its model, not a checkpoint it loaded: the name is never sent
    as a path (an engine that cannot resolve it may stop serving), and the probe says the
    weights found are not back."""
    with FakeDeployment("vllm", workers=1, initial_model_path=FOUND) as fleet:
        run = finished_run(fleet, tmp_path, "--capability", "refresh.post_update_generation")
        sent = [r.body for r in fleet.admin_ledger if isinstance(r.body, dict)]
    matrix = matrix_of(tmp_path)
    assert run.returncode == 4, run.stdout[-3000:]
    worker = matrix["fleet_restore"][0]
    assert worker["verified"] is False
    assert worker["before"]["sources"]["model_path"] == "discovery's model"
    served_name = worker["before"]["model_path"]
    assert not served_name.startswith("/")
    assert "is a served name" in " ".join(worker["problems"]), worker
    assert all(body.get("model_path") != served_name for body in sent), sent


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_run_stopped_midway_restores_too(tmp_path: Path, signum: int) -> None:
    with FakeDeployment("vllm", workers=1, initial_model_path=FOUND) as fleet:
        before = greedy(fleet)
        process = subprocess.Popen(
            command(
                fleet,
                tmp_path,
                "--capability",
                "refresh.post_update_generation",
                "--capability",
                "refresh.lifecycle",
                "--restore-model-path",
                FOUND,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ends = time.monotonic() + 120
        while time.monotonic() < ends and not any(
            record.path.endswith("update_weights_from_disk") for record in fleet.admin_ledger
        ):
            time.sleep(0.05)
        os.kill(process.pid, signum)
        output, _ = process.communicate(timeout=120)
        after = greedy(fleet)
    matrix = matrix_of(tmp_path)
    assert process.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum], output[-3000:]
    assert matrix["complete"] is False
    assert all(worker["restored"] for worker in matrix["fleet_restore"]), matrix["fleet_restore"]
    assert [ids for ids, _ in after] == [ids for ids, _ in before]


def fleets_file(directory: Path, fleets: dict[str, FakeDeployment], *, restore: str) -> Path:
    """A `--targets` file: one table per fleet, mutations allowed on all its workers."""
    tables = [
        f'[{name}]\nfrontend = "{fleet.frontend_url}"\nrl_url = "{fleet.rl_url}"\n'
        'backend = "vllm"\nallow_mutations = true\nall_workers = true\n'
        f"update_model_paths = {json.dumps(list(CHECKPOINTS[1::2]))}\n"
        f'restore_model_path = "{restore}"\n'
        for name, fleet in fleets.items()
    ]
    path = directory / "fleets.toml"
    path.write_text("\n".join(tables))
    return path


def several_fleets_command(targets: Path, report: Path, processes: str) -> list[str]:
    """The run of `targets`: in the run's own process ("1"), forked ("2"), or under pytest-xdist
    ("xdist": `pytest -p rl_conformance.plugin -n 2`)."""
    flags = ["--report-dir", str(report), "--examples", "2"]
    flags += ["--capability", "refresh.post_update_generation"]
    if processes != "xdist":
        module = [sys.executable, "-m", "rl_conformance", "run", "--targets", str(targets)]
        return [*module, *flags, "--jobs", processes]
    suites = str(suites_dir())
    return [
        *(sys.executable, "-m", "pytest", suites, "-p", "rl_conformance.plugin", "-n", "2"),
        *("-q", "-p", "no:cacheprovider", "--confcutdir", suites, "--rl-targets", str(targets)),
        *[flag.replace("--", "--rl-", 1) if flag.startswith("--") else flag for flag in flags],
    ]


@pytest.mark.parametrize("processes", ["1", "2", "xdist"])
def test_several_fleets_in_one_run_are_each_put_back_whatever_the_processes(
    tmp_path: Path, processes: str
) -> None:
    """Two fleets in one run: both in the run's own process, each in a forked one (`--jobs
    2`), or in pytest-xdist's workers. Either way each worker is put back and the run says so;
    a fleet whose restore does not take is the run's first line and exit 4."""
    with (
        FakeDeployment("vllm", workers=1, initial_model_path=FOUND) as first,
        FakeDeployment(
            "vllm", workers=1, initial_model_path=FOUND, faults=("update_applied_once",)
        ) as second,
    ):
        before = greedy(first)
        targets = fleets_file(tmp_path, {"first": first, "second": second}, restore=FOUND)
        run = subprocess.run(
            several_fleets_command(targets, tmp_path / "report", processes),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        after = greedy(first)
    matrix = matrix_of(tmp_path / "report")
    restored = {worker["target"]: worker["restored"] for worker in matrix["fleet_restore"]}
    assert restored == {"first": True, "second": False}, run.stdout[-3000:]
    assert [ids for ids, _ in after] == [ids for ids, _ in before]
    assert matrix["exit_status"] == 4, run.stdout[-3000:]
    assert run.returncode == (1 if processes == "xdist" else 4), run.stdout[-3000:]
    assert matrix["warnings"][0].startswith("FLEET NOT RESTORED: second")
    assert "the fleet as the run leaves it" in run.stdout


def test_a_forked_run_stopped_midway_puts_each_fleet_back(tmp_path: Path) -> None:
    """Ctrl-C reaches the processes testing each fleet; each puts its workers back before it
    exits (the parent waits for it past its usual grace), and the parent reports them."""
    with (
        FakeDeployment("vllm", workers=1, initial_model_path=FOUND) as first,
        FakeDeployment("vllm", workers=1, initial_model_path=FOUND) as second,
    ):
        before = [greedy(first), greedy(second)]
        targets = fleets_file(tmp_path, {"first": first, "second": second}, restore=FOUND)
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "rl_conformance", "run", "--targets", str(targets)),
                *("--report-dir", str(tmp_path / "report"), "--examples", "2", "--jobs", "2"),
                *("--capability", "refresh.post_update_generation"),
                *("--capability", "refresh.lifecycle"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ends = time.monotonic() + 120
        while time.monotonic() < ends and not all(
            any(r.path.endswith("update_weights_from_disk") for r in fleet.admin_ledger)
            for fleet in (first, second)
        ):
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGINT)
        output, _ = process.communicate(timeout=300)
        after = [greedy(first), greedy(second)]
    matrix = matrix_of(tmp_path / "report")
    assert process.returncode == 130, output[-3000:]
    assert matrix["complete"] is False
    restored = {worker["target"]: worker["restored"] for worker in matrix["fleet_restore"]}
    assert restored == {"first": True, "second": True}, (matrix["fleet_restore"], output[-3000:])
    assert [[ids for ids, _ in fleet] for fleet in after] == [
        [ids for ids, _ in fleet] for fleet in before
    ]
