"""The certification kit meets clients as real frameworks write them: one scenario that cannot
run never hides the others' verdicts; a client that implements half the protocol is judged on
that half; asyncio clients are driven, and cancelled when abandoned; checkpoint paths are real
directories the kit owns; the scenario's events begin after start-up; and a worker may be
verified by any of the ways the contract allows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.certify import driving
from rl_conformance.certify.checklist import GENERATION_ITEMS
from rl_conformance.certify.fleets import SIDECAR_FLEET
from rl_conformance.certify.runner import certify, run_scenario
from rl_conformance.certify.scenarios import scenario

from . import kit_adapters

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _cells(matrix: Any, adapter: str) -> dict[str, dict[str, Any]]:
    document = matrix.to_json()
    return {row["id"]: row["cells"][adapter] for row in document["capabilities"]}


def _failed(result: Any) -> list[str]:
    return sorted(finding.check_id for finding in result.failed)


def test_a_scenario_that_cannot_run_hides_no_other_verdict() -> None:
    chosen = [scenario("iteration"), scenario("refresh_during_rollout")]
    matrix, results = certify({"refuses": kit_adapters.RefusesSlowDeadlines}, chosen, jobs=2)
    by_name = {result.scenario.name: result for result in results}
    refused = by_name["refresh_during_rollout"]
    assert refused.error == (
        "the factory raised: RuntimeError: refusing to start: attempt deadline above 10 s"
    )
    assert {f.outcome for f in refused.findings} == {"skipped"}
    assert all(refused.error in f.message for f in refused.findings)
    assert by_name["iteration"].error is None and _failed(by_name["iteration"]) == []
    cells = _cells(matrix, "refuses")
    assert "error" not in {cell["outcome"] for cell in cells.values()}
    assert cells["adapter.complete_iteration"]["outcome"] == "pass"
    assert cells["adapter.one_policy_samples"]["outcome"] == "skipped"  # only that scenario


def test_a_factory_that_hangs_is_abandoned_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driving, "STEP_BOUND_S", 0.5)
    started = time.monotonic()
    result = run_scenario("hangs", kit_adapters.HangsAtStartUp, scenario("iteration"))
    assert time.monotonic() - started < 3
    assert result.error == "the factory did not return within 0 s (abandoned)" or (
        result.error is not None and "did not return within" in result.error
    )


def test_a_declaration_outside_the_protocol_is_named() -> None:
    result = run_scenario("bad", kit_adapters.BadDeclaration, scenario("iteration"))
    assert result.error is not None
    assert "implements" in result.error and "'training'" in result.error


def test_a_refresh_only_client_is_judged_on_its_refresh_alone() -> None:
    matrix, results = certify({"refresh-only": kit_adapters.RefreshOnly}, [scenario("iteration")])
    (result,) = results
    assert [s.outcome for s in result.steps if s.kind == "generate"] == ["not-claimed"] * 3
    cells = _cells(matrix, "refresh-only")
    for item, cell in cells.items():
        if item in GENERATION_ITEMS:
            assert cell["outcome"] == "unsupported", item
            assert "declares it implements refresh only" in cell["reason"]
        else:
            assert cell["outcome"] in ("pass", "skipped"), (item, cell)
    assert cells["adapter.complete_iteration"]["outcome"] == "pass"
    document = matrix.to_json()
    assert document["exit_status"] == 0


def test_an_asyncio_client_is_driven_on_its_own_loop() -> None:
    result = run_scenario("async", kit_adapters.AsyncReference, scenario("iteration"))
    assert result.error is None and _failed(result) == []
    assert [s.outcome for s in result.steps] == ["returned"] * 4


def test_an_abandoned_asyncio_step_is_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driving, "STEP_BOUND_S", 1.0)
    kit_adapters.CANCELLED.clear()
    result = run_scenario("async-hangs", kit_adapters.AsyncHangingRefresh, scenario("iteration"))
    refresh = next(s for s in result.steps if s.kind == "refresh")
    assert refresh.outcome == "hung"
    deadline = time.monotonic() + 5
    while not kit_adapters.CANCELLED and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kit_adapters.CANCELLED == ["policy-v1"]
    assert "adapter.complete_iteration" in _failed(result)


def test_checkpoint_paths_are_real_directories_the_kit_owns() -> None:
    kit_adapters.CHECKPOINTS_SEEN.clear()
    result = run_scenario("marker", kit_adapters.WritesMarker, scenario("two_iterations"))
    assert result.error is None and _failed(result) == []
    paths = [Path(p) for p in kit_adapters.CHECKPOINTS_SEEN]
    assert [p.name for p in paths] == ["policy-v1", "policy-v2"]
    assert all(p.parent == paths[0].parent for p in paths)
    assert paths[0].parent.name.startswith("rl-conformance-checkpoints-")
    assert Path(tempfile.gettempdir()) in paths[0].parents
    assert not paths[0].parent.exists()  # removed with the scenario
    update = next(
        record for record in result.audit if record["path"] == "/engine/update_weights_from_disk"
    )
    assert update["body"]["model_path"] == str(paths[0])


def test_the_events_begin_after_start_up() -> None:
    """A client that reads discovery while starting meets a healthy fleet; its refresh meets
    the discovery `error` and fails closed, which is judged, not reported as a crash."""
    result = run_scenario(
        "startup", kit_adapters.StartsUpOnDiscovery, scenario("discovery_entry_error")
    )
    assert result.error is None
    findings = {f.check_id: f.outcome for f in result.findings}
    assert findings["adapter.gated_after_failure"] == "pass"
    assert _failed(result) == []
    partial = run_scenario(
        "startup", kit_adapters.StartsUpOnDiscovery, scenario("partial_worker_set")
    )
    assert partial.error is None and _failed(partial) == []
    assert any(step.outcome == "refresh-failed" for step in partial.steps) or any(
        f.check_id == "adapter.complete_iteration" and f.outcome == "pass" for f in partial.findings
    )


def test_a_worker_may_be_verified_by_a_generation_it_served() -> None:
    result = run_scenario("by-generation", kit_adapters.VerifiesByGeneration, scenario("iteration"))
    assert result.error is None and _failed(result) == []
    routes = {record["path"] for record in result.audit}
    assert "/engine/get_weight_version" not in routes


def test_an_update_reply_naming_the_version_verifies_the_worker() -> None:
    result = run_scenario("reply", kit_adapters.NeverVerifies, scenario("iteration"))
    assert result.error is None and _failed(result) == []
    update = next(r for r in result.audit if r["path"] == "/engine/update_weights_from_disk")
    assert update["response"]["version"] == "policy-v1"  # 1.6.1's reply names it


def test_a_refresh_that_verifies_no_worker_fails() -> None:
    result = run_scenario(
        "never", kit_adapters.SidecarNeverVerifies, scenario("iteration"), SIDECAR_FLEET
    )
    assert _failed(result) == ["adapter.complete_iteration"]
    finding = next(f for f in result.failed)
    assert "was not verified to serve the policy" in finding.message


def _as_unprivileged() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv is not installed: cannot drop privileges")
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run(
        [*drop, sys.executable, "-c", "import rl_conformance, tests.certify.kit_adapters"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(
            "this checkout or its environment is not readable by an unprivileged user "
            f"(uid 65534): {probe.stderr.strip().splitlines()[-1:]}"
        )
    return drop


def test_the_kit_runs_unprivileged_and_writes_only_its_directories() -> None:
    """As a user who can write only its report directory and the temporary directory, the kit
    certifies a client that writes into its checkpoint directories."""
    report = Path(tempfile.mkdtemp(prefix="rl-conformance-unprivileged-"))
    report.chmod(0o777)
    scratch = report / "tmp"  # the kit's temporary directory, as TMPDIR names it
    scratch.mkdir(mode=0o777)
    scratch.chmod(0o777)
    try:
        done = subprocess.run(
            [
                *_as_unprivileged(),
                sys.executable,
                "-m",
                "rl_conformance",
                "certify-adapter",
                "tests.certify.kit_adapters:WritesMarker",
                "--scenario",
                "iteration",
                "-q",
                "--report-dir",
                str(report / "out"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
            env={
                **os.environ,
                "HOME": str(report),
                "TMPDIR": str(scratch),
                "PYTHONDONTWRITEBYTECODE": "1",
            },
            check=False,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        matrix = json.loads((report / "out" / "matrix.json").read_text())
        adapter = matrix["targets"][0]["id"]
        cells = {row["id"]: row["cells"][adapter] for row in matrix["capabilities"]}
        assert cells["adapter.complete_iteration"]["outcome"] == "pass"
        assert sorted(p.name for p in report.iterdir()) == ["out", "tmp"]
        assert list(scratch.iterdir()) == []  # every checkpoint directory removed
    finally:
        shutil.rmtree(report, ignore_errors=True)
