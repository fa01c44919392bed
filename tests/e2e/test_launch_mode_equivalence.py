"""A faithful fake reached the way our users reach their deployments, by URL with nothing but the
documented flags, gets the verdicts it gets when the suite launches it: no `fail`, no `error`,
and every capability the launched run passes passes by URL too (`NEEDS_A_LAUNCHER` aside: a
listener restart, a worker stopped and started, a cold start on a checkpoint, a weight-update
group with no trainer, which only a launched deployment offers).

Read-only by URL, every mutating capability is `skipped` with the flag to give named."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.runtime.request_trace import RequestTrace
from rl_conformance.launchers.tracing import request_trace_environment

pytestmark = pytest.mark.slow

FLAVOURS = {  # fake deployment name -> (backend, admin family)
    "vllm": ("vllm", "python"),
    "sglang": ("sglang", "python"),
    "trtllm": ("trtllm", "python"),
    "vllm-sidecar": ("vllm", "sidecar"),
}
NEEDS_A_LAUNCHER = {
    "namespace.scope",  # a listener restart
    "discovery.departure_visible",  # a worker's process stopped and started again
    "discovery.probe_replies_validated",  # a worker's route-probe reply replaced
    "discovery.probe_deadline",  # a worker's route probe left unanswered
    "refresh.recovered_worker",  # a worker's engine killed
    "migration.continuity",  # a worker's process killed under a stream
    # Its reference for our fakes' made-up checkpoints is a cold start on the checkpoint (the
    # `cold_start` channel); by URL, /checkpoints/a is not readable here, so it is skipped.
    "refresh.served_policy_verified",
    # A weight-update group formed with no trainer on its other end: only a deployment the suite
    # launched is known to accept one; by URL the distributed sequence is not sent (the Python
    # worker has no update_weight_version to judge instead), so it is skipped.
    "admin.distributed_update",
}
CHECKPOINTS = ("--update-model-path", "/checkpoints/a", "--update-model-path", "/checkpoints/b")


def transfers(directory: Path) -> list[str]:
    """Two `--weight-transfer` files, as a sidecar user would describe their transfers."""
    flags = []
    for name in ("a", "b"):
        path = directory / f"transfer-{name}.json"
        info = {"names": [f"layer.{name}"], "dtype_names": ["bfloat16"], "shapes": [[4, 4]]}
        path.write_text(json.dumps({"init_info": {"master_port": 29500}, "update_info": [info]}))
        flags += ["--weight-transfer", str(path)]
    return flags


def run(directory: Path, *arguments: str) -> dict[str, Any]:
    report = directory / "report"
    command = [sys.executable, "-m", "rl_conformance", "run", "-q", "--report-dir", str(report)]
    done = subprocess.run([*command, *arguments], capture_output=True, text=True, timeout=600)
    assert (report / "matrix.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    matrix: dict[str, Any] = json.loads((report / "matrix.json").read_text())
    matrix["returncode"] = done.returncode
    return matrix


def cells(matrix: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (target,) = matrix["targets"]
    return {row["id"]: row["cells"][target["id"]] for row in matrix["capabilities"]}


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, Any]]]:
    matrix = run(tmp_path_factory.mktemp("launched"))
    return {
        target["id"]: {row["id"]: row["cells"][target["id"]] for row in matrix["capabilities"]}
        for target in matrix["targets"]
    }


@pytest.fixture(params=sorted(FLAVOURS))
def deployment(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, FakeDeployment]]:
    """A fake whose frontend writes its request trace, as a user turns it on (the file is then
    given with --request-trace)."""
    backend, family = FLAVOURS[request.param]
    with FakeDeployment(backend, admin_family=family) as fleet:
        fleet.state.request_trace = RequestTrace.from_environment(
            request_trace_environment(tmp_path / "request-trace.jsonl")
        )
        yield request.param, fleet


def failing(observed: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {
        cap: cell["reason"]
        for cap, cell in observed.items()
        if cell["outcome"] in ("fail", "error")
    }


def by_url(fleet: FakeDeployment, *, workers: bool, trace: bool = False) -> list[str]:
    """The documented flags for a deployment reached by URL; worker URLs for the backends whose
    workers discovery does not list; the request trace's file."""
    flags = [
        "--frontend",
        fleet.frontend_url,
        "--rl-url",
        fleet.rl_url,
        "--backend",
        fleet.assembly.backend,
    ]
    if workers and fleet.assembly.backend != "vllm":
        for worker in fleet.workers:
            flags += ["--worker-url", worker["system_url"]]
    if trace and fleet.state.request_trace is not None:
        flags += ["--request-trace", str(fleet.state.request_trace.path)]
    return flags


def test_a_mutating_run_by_url_passes_what_the_launched_run_passes(
    deployment: tuple[str, FakeDeployment],
    launched: dict[str, dict[str, dict[str, Any]]],
    tmp_path: Path,
) -> None:
    flavour, fleet = deployment
    matrix = run(
        tmp_path,
        *by_url(fleet, workers=True, trace=True),
        "--allow-mutations",
        "--all-workers",
        *CHECKPOINTS,
        *transfers(tmp_path),
        # what the fleet was started on, as a user knows it: a SGLang worker reports no served
        # model path unless get_model_info is allowlisted, so the run could not restore it
        "--restore-model-path",
        fleet.assembly.options.model,
    )
    observed = cells(matrix)
    assert not failing(observed)
    lost = {
        cap: (observed[cap]["outcome"], observed[cap]["reason"])
        for cap, cell in launched[f"fake-{flavour}"].items()
        if cell["outcome"] == "pass"
        and observed[cap]["outcome"] != "pass"
        and cap not in NEEDS_A_LAUNCHER
    }
    assert not lost
    if flavour == "vllm-sidecar":
        # its weights are taken by transfer alone: no checkpoint path puts back what the run
        # sent, and the run says so (exit 4) instead of calling the fleet as it was found
        restored = matrix.get("fleet_restore") or []
        assert matrix["returncode"] == 4, restored
        assert all("takes weights by transfer" in " ".join(w["problems"]) for w in restored)
    else:
        assert matrix["returncode"] == 0, matrix.get("fleet_restore")


def test_a_read_only_run_by_url_skips_what_it_may_not_do_and_says_why(
    deployment: tuple[str, FakeDeployment], tmp_path: Path
) -> None:
    matrix = run(tmp_path, *by_url(deployment[1], workers=False))
    observed = cells(matrix)
    assert not failing(observed)
    assert matrix["returncode"] == 0
    # The environment record of a deployment reached by URL: what it shows of itself.
    assert matrix["environment"]["command"][:2] == ["rl-conformance", "run"]
    (target,) = matrix["targets"]
    assert target["kind"] == "external"
    topology = target["topology"]
    assert topology["disaggregated"] is False and topology["frontend_components"] == ["backend"]
    expected_workers = 2 if deployment[0] in ("vllm", "vllm-sidecar") else 0
    assert topology.get("discovered_workers", 0) == expected_workers, topology
    skipped = {
        cap: cell["reason"] for cap, cell in observed.items() if cell["outcome"] == "skipped"
    }
    launched = "judged only on a deployment the suite launches (--fake NAME"
    assert skipped["namespace.scope"].startswith(launched)
    assert "restarts the RL listener" in skipped["namespace.scope"]
    assert skipped["discovery.departure_visible"].startswith(launched)
    probed = ("discovery.probe_replies_validated", "discovery.probe_deadline")
    assert all("route probe with a chosen reply" in skipped[cap] for cap in probed), skipped
    if "refresh.recovered_worker" in skipped:
        assert "kills one worker's engine" in skipped["refresh.recovered_worker"], skipped
    assert "kills one worker's process" in skipped["migration.continuity"], skipped
    assert not any(
        channel in reason
        for reason in skipped.values()
        for channel in ("listener_restart", "probe_reply", "engine_recovery", "worker_kill")
    ), skipped  # plain words, not the channels' identifiers
    probed += ("refresh.recovered_worker", "migration.continuity")
    flags = ("--allow-mutations", "--worker-url", "--rl-url", "--request-trace")
    assert all(
        any(flag in reason for flag in flags)
        for cap, reason in skipped.items()
        if cap not in ("namespace.scope", "discovery.departure_visible", *probed)
    ), skipped
