"""The suite against the REAL Dynamo 1.6.1 frontend (CPU only, loopback): with Dynamo's own mocker
engine, and with our toy engine served as a real Dynamo worker.

Every `fail` cell here is a real, evidenced behaviour of Dynamo 1.6.1 and its mocker, listed with
the reason; a cell that changes outcome is a finding, not noise."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
P, F, U, S = "pass", "fail", "unsupported", "skipped"

MOCKER_EXPECTED: dict[str, tuple[str, str]] = {
    "discovery.protocol_version": (P, ""),
    "discovery.schema": (P, ""),
    "discovery.listener_isolation": (P, ""),
    "discovery.worker_registration": (F, "the mocker registers no RL endpoint"),
    "discovery.routes": (F, "the mocker registers no RL endpoint"),
    "discovery.endpoint_identity": (F, "the mocker registers no RL endpoint"),
    "discovery.identity_not_position": (F, "the mocker registers no RL endpoint"),
    "discovery.error_fails_closed": (F, "the mocker registers no RL endpoint"),
    "discovery.probe_replies_validated": (S, "the launcher offers no probe-reply channel"),
    "discovery.probe_deadline": (S, "the launcher offers no probe-reply channel"),
    "tokens.token_input": (P, ""),
    "tokens.prompt_ids_echo": (P, ""),
    "tokens.completion_ids": (P, ""),
    "tokens.choice_count": (F, "the mocker ignores n and returns one choice"),
    "tokens.usage_consistent": (P, ""),
    "tokens.stream_concat": (F, "mocker tokens are random, even at temperature 0"),
    "tokens.text_token_equivalence": (F, "mocker tokens are random, even at temperature 0"),
    "tokens.model_identity": (P, ""),
    "tokens.input_tokens_estimate": (P, ""),
    "logprobs.selected_alignment": (F, "the mocker returns no logprobs"),
    "logprobs.finite_nonpositive": (F, "the mocker returns no logprobs"),
    "logprobs.topk_consistent": (F, "the mocker returns no logprobs"),
    "logprobs.prompt_alignment": (F, "the mocker returns no prompt logprobs"),
    "generate.native_route": (U, "the vLLM native route is not served for the mocker"),
    "generate.sglang_logprob_alignment": (P, "the mocker's /generate emits synthetic logprobs"),
    "stream.single_terminal": (F, "a stream asked for n=2 carries one choice"),
    "stream.nothing_after_terminal": (P, ""),
    "stream.done_last": (P, ""),
    "stream.finish_reason": (P, ""),
    "stream.terminal_success": (P, ""),
    "stream.terminal_reason_verified": (P, "its stops and lengths are true even of random tokens"),
    "admin.route_negotiation": (F, "no worker advertises administration"),
    "admin.success_semantics": (F, "no worker advertises administration"),
    "admin.invalid_pause_mode": (F, "no worker advertises administration"),
    "admin.pause_cycles": (F, "no worker advertises administration"),
    "admin.resume_serves_promptly": (F, "no worker advertises administration"),
    "admin.stopped_worker_unrouted": (U, "the mocker's system server speaks no administration"),
    "discovery.departure_visible": (S, "the launcher stops and restarts only our toy workers"),
    "admin.unpaused_update_refused": (F, "no worker advertises administration"),
    "admin.version_declaration": (F, "no worker advertises administration"),
    "refresh.recovered_worker": (S, "not in Dynamo 1.6.1: its workers restart no dead engine"),
    "admin.distributed_update": (F, "no worker advertises administration"),
    "refresh.pause_gates": (F, "no worker advertises administration"),
    "refresh.pause_mode_effect": (F, "no worker advertises administration"),
    "refresh.version_verified": (F, "no worker advertises administration"),
    "refresh.post_update_generation": (F, "no worker advertises administration"),
    "refresh.served_policy_verified": (F, "no worker advertises administration"),
    "refresh.kv_invalidation": (F, "no worker advertises administration"),
    "refresh.lifecycle": (F, "no worker advertises administration"),
    "refresh.inflight_terminal": (F, "no worker advertises administration"),
    "refresh.straddle_reported": (U, "vLLM names no weight version per token"),
    "namespace.scope": (F, "the mocker registers no RL endpoint"),
    "cancel.propagation": (P, "judged from the mocker's system-server metrics"),
    "retry.attempt_identity": (P, ""),
    "migration.continuity": (S, "worker_kill"),
    "telemetry.bounded_labels": (P, ""),
    "telemetry.trace_correlation": (P, "joined with the real frontend's own request trace"),
    "telemetry.weight_update_gauge": (F, "no worker advertises administration"),
    "errors.validation": (P, ""),
}


NO_VERSION_PER_TOKEN = {"refresh.straddle_reported"}
"""A vLLM deployment names no weight version per token (documented unsupported)."""
STAYS_ROUTED = {"admin.stopped_worker_unrouted"}
"""The vLLM Python worker holds requests while paused and advertises no control that takes it out
of routing (undocumented for vLLM: unsupported)."""
NEEDS_PROBE_REPLY = {"discovery.probe_replies_validated", "discovery.probe_deadline"}
"""A worker's route-probe reply is replaced only through our fakes' control port: the launcher
offers no such channel, so the cells are skipped naming it."""
RELEASE_LACKS = {"refresh.recovered_worker"}
"""Surfaces Dynamo 1.6.1 lacks (`model/releases.py`), whose tests need a channel no launcher of a
real deployment offers: skipped, the release named."""
NEEDS_MIGRATION = {"migration.continuity"}
"""The launcher starts the frontend with Dynamo's default --migration-limit 0 unless told: the
cell is skipped naming the flag (`test_a_migrated_stream_on_the_real_frontend_loses_no_id`
judges it with the flag)."""
NO_GAUGE = {"telemetry.weight_update_gauge"}
"""vLLM's weight-transfer gauge lives in its online RL API, which the Python worker path does not
mount: skipped, the gauge named."""
NEEDS_A_REFERENCE = {"refresh.served_policy_verified"}
"""Our toy engine's checkpoints are made-up paths: no file to compute a reference from, and this
launcher offers no cold start, so the cell is skipped naming the flags."""


def leftover_processes(matrix: dict[str, Any]) -> list[str]:
    """Processes of the run's own launches still alive: those whose command line or environment
    names one of its work directories (other tests may run deployments alongside)."""
    notes = " ".join(note for target in matrix["targets"] for note in target.get("notes", []))
    workdirs = set(re.findall(r"(/\S*?rl-conformance-dynamo-[^/\s]+)", notes))
    assert workdirs, notes[:2000]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            environment = (entry / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if any(workdir in command or workdir in environment for workdir in workdirs):
            found.append(f"{entry.name}: {command[:200]}")
    return found


def run_launch(directory: Path, *arguments: str, timeout_s: float = 600) -> dict[str, Any]:
    """`rl-conformance run` with these arguments; its matrix, with the run's stdout tail under
    `stdout` for the assertions' messages."""
    command = [
        sys.executable,
        "-m",
        "rl_conformance",
        "run",
        "-q",
        "--report-dir",
        str(directory),
        "--examples",
        "3",
        *arguments,
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    assert (directory / "matrix.json").exists(), run.stdout[-4000:] + run.stderr[-4000:]
    matrix: dict[str, Any] = json.loads((directory / "matrix.json").read_text())
    matrix["stdout"] = run.stdout[-6000:]
    return matrix


@pytest.fixture(scope="module")
def mocker_matrix(dynamo_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_launch(
        tmp_path_factory.mktemp("mocker"),
        "--launch",
        "dynamo-mocker",
        "--dynamo-python",
        str(dynamo_python),
    )


def test_mocker_column_launches_and_leaves_nothing_running(mocker_matrix: dict[str, Any]) -> None:
    target = mocker_matrix["targets"][0]
    assert target["kind"] == "dynamo" and target["versions"]["ai-dynamo"] == "1.6.1"
    ready = [note for note in target["notes"] if note.startswith("launch to ready")]
    assert ready, target["notes"]
    assert float(ready[0].split(":")[1].split()[0]) < 20
    assert leftover_processes(mocker_matrix) == []


@pytest.mark.parametrize("capability_id", sorted(MOCKER_EXPECTED))
def test_mocker_cells_are_real_evidenced_behaviour(
    mocker_matrix: dict[str, Any], capability_id: str
) -> None:
    cells = {row["id"]: row["cells"]["dynamo-mocker"] for row in mocker_matrix["capabilities"]}
    cell = cells[capability_id]
    expected, why = MOCKER_EXPECTED[capability_id]
    assert cell["outcome"] == expected, (why, cell["reason"], cell["evidence"][:2])
    if expected == F:
        assert cell["reason"] and (cell["evidence"] or "absent" in cell["reason"]), cell


@pytest.fixture(scope="module")
def fake_engine_matrix(
    dynamo_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    return run_launch(
        tmp_path_factory.mktemp("fake-engine"),
        "--launch",
        "dynamo-fake-vllm",
        "--dynamo-python",
        str(dynamo_python),
        "--allow-mutations",
        "--all-workers",
    )


def toy_expectation(capability_id: str, unsupported: set[str]) -> tuple[str, str]:
    """What our toy engine behind the real frontend gives a row, and what its reason names:
    skipped where an input or a fakes' channel is missing or the release lacks the surface,
    unsupported where the family documents so, else pass."""
    if capability_id in unsupported:
        return U, ""
    for skipped, needle in (
        (NEEDS_A_REFERENCE, "--reference-checkpoint"),
        (NO_GAUGE, "vllm:rl_weight_update_operations_in_flight"),
        (NEEDS_PROBE_REPLY, "answer the RL listener's route probe"),
        (RELEASE_LACKS, "not in Dynamo 1.6.1"),
        (NEEDS_MIGRATION, "--migration-limit"),
    ):
        if capability_id in skipped:
            return S, needle
    return P, ""


def assert_observable_cells(cells: dict[str, dict[str, Any]], unsupported: set[str]) -> None:
    """Every cell as reviewed; otherwise one message naming each cell that differs (its
    capability, outcome, reason and first evidence), so a CI summary line shows them all."""
    differing = []
    for capability_id, cell in cells.items():
        expected, needle = toy_expectation(capability_id, unsupported)
        if cell["outcome"] != expected or needle not in cell["reason"]:
            differing.append(
                f"{capability_id}: {cell['outcome']} (expected {expected}) {cell['reason']!r} "
                f"{cell['evidence'][:1]}"
            )
    assert not differing, " | ".join(differing)


def test_real_frontend_with_our_engine_passes_everything_it_can_observe(
    fake_engine_matrix: dict[str, Any],
) -> None:
    """The real frontend, router, nvext assembly, RL listener and worker admin routes of Dynamo
    1.6.1, with an engine that keeps the contract: no false failure."""
    cells = {
        row["id"]: row["cells"]["dynamo-fake-vllm"] for row in fake_engine_matrix["capabilities"]
    }
    assert_observable_cells(cells, NO_VERSION_PER_TOKEN | STAYS_ROUTED)
    assert fake_engine_matrix["exit_status"] == 0
    assert leftover_processes(fake_engine_matrix) == []


def test_a_migrated_stream_on_the_real_frontend_loses_no_id(
    dynamo_python: Path, tmp_path: Path
) -> None:
    """Dynamo 1.6.1's frontend with --migration-limit 3 and two toy workers: the worker under a
    stream is SIGKILLed, and the stream goes on on the other with every id in place. The real
    frontend counts the re-prefilled tokens in usage.prompt_tokens and keeps only the second
    worker's ids in nvext.engine_data (measured, not judged: checks.migration)."""
    matrix = run_launch(
        tmp_path,
        "--launch",
        "dynamo-fake-vllm",
        "--dynamo-python",
        str(dynamo_python),
        "--migration-limit",
        "3",
        "--workers",
        "2",
        "--allow-mutations",
        "--all-workers",
        "--capability",
        "migration.continuity",
    )
    cell = next(row for row in matrix["capabilities"] if row["id"] == "migration.continuity")
    cell = cell["cells"]["dynamo-fake-vllm"]
    assert cell["outcome"] == P, (cell["reason"], cell["evidence"][:1], matrix["stdout"])
    target = next(t for t in matrix["targets"] if t["id"] == "dynamo-fake-vllm")
    assert target["migration_limit"] == 3
    assert leftover_processes(matrix) == []


def test_read_only_run_against_the_real_frontend_skips_every_mutation(
    dynamo_python: Path, tmp_path: Path
) -> None:
    matrix = run_launch(
        tmp_path,
        "--launch",
        "dynamo-fake-vllm",
        "--dynamo-python",
        str(dynamo_python),
        "--capability",
        "refresh.version_verified",
        "--capability",
        "admin.route_negotiation",
    )
    cells = {row["id"]: row["cells"]["dynamo-fake-vllm"] for row in matrix["capabilities"]}
    assert cells["refresh.version_verified"]["outcome"] == S
    assert "read-only run" in cells["refresh.version_verified"]["reason"]
    assert cells["admin.route_negotiation"]["outcome"] == P


def test_the_environment_record_names_the_real_deployment(
    fake_engine_matrix: dict[str, Any],
) -> None:
    environment = fake_engine_matrix["environment"]
    assert environment["python"].startswith("CPython") and environment["cpus"]
    target = next(t for t in fake_engine_matrix["targets"] if t["id"] == "dynamo-fake-vllm")
    assert target["kind"] == "dynamo"
    assert target["versions"]["ai-dynamo"] == "1.6.1"
    topology = target["topology"]
    assert topology["discovered_workers"] >= 1 and topology["world_sizes"] == [1]
    assert topology["frontend_components"] == ["backend"] and topology["disaggregated"] is False


SGLANG_FAMILY_UNSUPPORTED = {
    "telemetry.weight_update_gauge",
    "discovery.worker_registration",
    "discovery.routes",
    "discovery.endpoint_identity",
    "discovery.identity_not_position",
    "discovery.error_fails_closed",
    "admin.route_negotiation",
    "admin.unpaused_update_refused",
    "admin.version_declaration",
    "namespace.scope",
}
"""SGLang workers do not register with /v1/rl/workers and take updates without a pause."""


def test_real_frontend_with_an_sglang_family_worker_passes_everything_it_can_observe(
    dynamo_python: Path, tmp_path: Path
) -> None:
    """The real frontend with our toy engine serving SGLang's /engine routes (no RL registration,
    reached by its system URL, leaving discovery while paused or released): no false failure."""
    matrix = run_launch(
        tmp_path,
        "--launch",
        "dynamo-fake-sglang",
        "--dynamo-python",
        str(dynamo_python),
        "--allow-mutations",
        "--all-workers",
    )
    cells = {row["id"]: row["cells"]["dynamo-fake-sglang"] for row in matrix["capabilities"]}
    assert_observable_cells(cells, SGLANG_FAMILY_UNSUPPORTED)
    assert matrix["exit_status"] == 0
    assert leftover_processes(matrix) == []


def counts(outcomes: list[str]) -> str:
    found = {outcome: outcomes.count(outcome) for outcome in (P, F, U, S) if outcome in outcomes}
    return ", ".join(f"{number} {outcome}" for outcome, number in found.items())


def test_the_documented_counts_are_the_reviewed_ones() -> None:
    """docs/DEPLOYMENTS.md and DYNAMO_RELEASES.md state what each real-Dynamo command gives; the
    counts are those of the reviewed cells above (which CI checks against the real frontend), for
    every capability of the registry."""
    from rl_conformance.model.capabilities import BY_ID

    assert set(MOCKER_EXPECTED) == set(BY_ID)
    mocker = counts([outcome for outcome, _ in MOCKER_EXPECTED.values()])
    toy = counts([toy_expectation(c, NO_VERSION_PER_TOKEN | STAYS_ROUTED)[0] for c in BY_ID])
    root = Path(__file__).resolve().parents[2]
    guide = " ".join((root / "docs" / "DEPLOYMENTS.md").read_text().split())
    releases = (root / "fixtures" / "DYNAMO_RELEASES.md").read_text()
    assert f"exits 1 with **{mocker}**" in guide, mocker
    assert f"exits 0 with **{toy}**" in guide, toy
    assert f"| {mocker} (exit 1) |" in releases and f"| {toy} (exit 0) |" in releases
    assert f"with {len(BY_ID)} capabilities" in releases
