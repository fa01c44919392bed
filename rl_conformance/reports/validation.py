"""Dynamo's run record (`dynamo.rl.validation.v1`) for each deployment or certified adapter of a
matrix, filled only from what the run measured (`validation_gates`) and what the user recorded
(`record_meta`), with every artifact named by an `artifact://bundle/...` URI below the report
directory. Each matrix cell a gate rests on is written as its own file (`cells/<subject>/
<capability>.json`), so a gate's artifacts are exactly its evidence."""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..model.record_meta import merged
from ..redaction import write_text
from .validation_gates import ADAPTER_GATES, DEPLOYMENT_GATES, Gate, Input

SCHEMA = "dynamo.rl.validation.v1"
VALIDATION_DIR = "validation"
CELLS_DIR = "cells"
AUDIT_DIR = "audit"
PASS, FAIL, ERROR, SKIPPED, NOT_RUN = "pass", "fail", "error", "skipped", "not run"
NOT_APPLICABLE = frozenset({"unsupported", "not-advertised"})
WORDS = {
    "prompt_logprobs": ("verified", "not_applicable", "not_run"),
    "cache_handling": ("invalidated", "not_applicable", "unverified"),
}
"""The record's words for a field that is not yes/no: (passed, not applicable, otherwise)."""
ENGINES = ("vllm", "sglang", "tensorrt_llm", "tensorrt-llm", "trtllm")


def bundle_uri(relative: str) -> str:
    return "artifact://bundle/" + quote(relative, safe="/._-")


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def is_adapter_matrix(document: Mapping[str, Any]) -> bool:
    rows = document.get("capabilities", [])
    return bool(rows) and all(row["id"].startswith("adapter.") for row in rows)


def _cells(document: Mapping[str, Any], subject: str) -> dict[str, dict[str, Any]]:
    return {
        row["id"]: row["cells"][subject]
        for row in document.get("capabilities", [])
        if subject in row.get("cells", {})
    }


def _outcome(cell: Mapping[str, Any] | None, scenarios: tuple[str, ...]) -> tuple[str, str]:
    """The verdict of one input, and why when it is not a pass."""
    if cell is None:
        return NOT_RUN, "not selected in this run"
    if not scenarios:
        return cell["outcome"], cell.get("reason", "")
    tests = [t for t in cell.get("tests", []) if t["nodeid"].split("::", 1)[0] in scenarios]
    outcomes = {t["outcome"] for t in tests}
    for worst in (FAIL, ERROR):
        if worst in outcomes:
            return worst, f"{worst} in {', '.join(scenarios)}"
    if PASS in outcomes:
        return PASS, ""
    return NOT_RUN, f"not judged in {', '.join(scenarios)}"


class _Judged:
    def __init__(self, cells: dict[str, dict[str, Any]]) -> None:
        self.cells = cells
        self.limitations: list[str] = []

    def outcome(self, item: Input) -> str:
        return _outcome(self.cells.get(item.capability), item.scenarios)[0]

    def why(self, item: Input) -> str:
        outcome, reason = _outcome(self.cells.get(item.capability), item.scenarios)
        text = f"{item.capability}: {outcome}" + (f" ({reason})" if reason else "")
        return text if len(text) <= 240 else text[:237] + "..."

    def holds(self, inputs: Sequence[Input]) -> bool:
        return all(self.outcome(item) == PASS for item in inputs)

    def status(self, gate: Gate) -> str:
        if gate.not_run_because:
            self.limitations.append(f"{gate.name}: not run: {gate.not_run_because}")
            return "not_run"
        outcomes = [(item, self.outcome(item)) for item in gate.inputs]
        if any(outcome == FAIL for _, outcome in outcomes):
            return "failed"
        lacking = [
            item
            for item, outcome in outcomes
            if outcome != PASS and not (item.optional and outcome in NOT_APPLICABLE)
        ]
        if not lacking:
            return "passed"
        self.limitations.append(
            f"{gate.name}: not run: " + "; ".join(self.why(item) for item in lacking)
        )
        return "not_run"


def _measured(cells: Mapping[str, Any], capability: str, key: str) -> dict[str, Any]:
    """The last measurement `key` of the tests of one cell."""
    found: dict[str, Any] = {}
    for test in cells.get(capability, {}).get("tests", []):
        value = test.get("measured", {}).get(key)
        if isinstance(value, dict):
            found = value
    return found


def _gates(
    gates: Sequence[Gate], judged: _Judged, artifacts: dict[str, list[str]], adapter: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for gate in gates:
        entry: dict[str, Any] = {"status": judged.status(gate)}
        for field in gate.fields:
            words = WORDS.get(field.name)
            if words is None:
                entry[field.name] = judged.holds(field.inputs)
                continue
            outcome = judged.outcome(field.inputs[0])
            passed, not_applicable, otherwise = words
            entry[field.name] = (
                passed
                if outcome == PASS
                else not_applicable
                if outcome in NOT_APPLICABLE and not adapter
                else otherwise
            )
        entry["artifacts"] = artifacts.get(gate.name, [])
        out[gate.name] = entry
    token = out["token_logprob"]
    token.setdefault("prompt_logprobs", "not_run")
    out["training_iteration"].update(
        optimizer_steps=0,
        rollout_phase_completed=False,
        reward_or_advantage_completed=False,
        actor_update_completed=False,
        weight_sync_completed=False,
        post_update_rollout_completed=False,
    )
    update = _measured(
        judged.cells,
        "adapter.complete_iteration" if adapter else "refresh.version_verified",
        "policy_update",
    )
    out["policy_update"].update(
        target_version=str(update.get("target_version", "")),
        workers_targeted=int(update.get("workers_targeted", 0)),
        workers_verified=int(update.get("workers_verified", 0)),
    )
    counts = _measured(judged.cells, "telemetry.trace_correlation", "trace_correlation").get(
        "counts", {}
    )
    out["trace_correlation"].update(
        {
            name: int(counts.get(name, 0))
            for name in (
                "framework_attempts",
                "joined_payloads",
                "expected_terminals",
                "joined_terminals",
            )
        },
        trace_overhead_percent=None,
    )
    return {name: _ordered(name, out[name]) for name in out}


_FIELD_ORDER = {
    "token_logprob": (
        "status",
        "exact_completion_token_ids",
        "completion_logprobs_aligned",
        "prompt_logprobs",
        "terminal_reasons_verified",
    ),
    "policy_update": (
        "status",
        "target_version",
        "workers_targeted",
        "workers_verified",
        "cache_handling",
        "post_update_generation",
    ),
}


def _ordered(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    order = _FIELD_ORDER.get(name, ("status",))
    first = {key: entry[key] for key in order if key in entry}
    return {
        **first,
        **{k: v for k, v in entry.items() if k not in first and k != "artifacts"},
        "artifacts": entry["artifacts"],
    }


def _record_state(gates: Mapping[str, Any], complete: bool) -> str:
    statuses = [gate["status"] for gate in gates.values()]
    if "failed" in statuses:
        return "failed"
    if complete and "passed" in statuses:
        return "passed"
    return "planned"


def _backend_version(target: Mapping[str, Any]) -> str:
    versions = target.get("versions", {})
    for name in ENGINES:
        for key in (name, f"{name}-cpu"):
            if versions.get(key):
                return str(versions[key])
    return ""


def _serving_mode(target: Mapping[str, Any]) -> str | None:
    disaggregated = target.get("topology", {}).get("disaggregated")
    if disaggregated is None:
        return None
    return "disaggregated" if disaggregated else "aggregated"


def write_cell_files(document: Mapping[str, Any], subject: str, directory: Path) -> dict[str, str]:
    """Each cell of `subject` as `cells/<subject>/<capability>.json`; capability -> relative
    path."""
    written = {}
    for capability, cell in _cells(document, subject).items():
        relative = f"{CELLS_DIR}/{safe_name(subject)}/{safe_name(capability)}.json"
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        body = {"capability": capability, "subject": subject, **copy.deepcopy(cell)}
        write_text(path, json.dumps(body, indent=2) + "\n")
        written[capability] = relative
    return written


def _gate_artifacts(
    gates: Sequence[Gate],
    cells: Mapping[str, Mapping[str, Any]],
    cell_files: Mapping[str, str],
    subject: str,
    directory: Path,
) -> dict[str, list[str]]:
    artifacts: dict[str, list[str]] = {}
    for gate in gates:
        paths: list[str] = []
        for item in gate.inputs:
            if item.capability in cell_files:
                paths.append(cell_files[item.capability])
            for evidence in cells.get(item.capability, {}).get("evidence", []):
                wire = evidence.get("wire_log")
                if isinstance(wire, str) and (directory / wire).is_file():
                    paths.append(wire)
            for scenario in item.scenarios:
                audit = f"{AUDIT_DIR}/{safe_name(subject)}--{scenario}.json"
                if (directory / audit).is_file():
                    paths.append(audit)
        artifacts[gate.name] = [bundle_uri(path) for path in dict.fromkeys(paths)]
    return artifacts


def validation_record(
    document: Mapping[str, Any],
    subject: str,
    directory: Path,
    meta: Mapping[str, Any] | None = None,
    integration_artifact: str = "",
) -> dict[str, Any]:
    """The record of one deployment (a matrix target) or one certified adapter; writes the cell
    files it names."""
    adapter = is_adapter_matrix(document)
    gates_table = ADAPTER_GATES if adapter else DEPLOYMENT_GATES
    cells = _cells(document, subject)
    cell_files = write_cell_files(document, subject, directory)
    artifacts = _gate_artifacts(gates_table, cells, cell_files, subject, directory)
    judged = _Judged(cells)
    gates = _gates(gates_table, judged, artifacts, adapter)
    target = next((t for t in document.get("targets", []) if t.get("id") == subject), {})
    limitations = list(judged.limitations)
    serving_mode = _serving_mode(target)
    started = str(document.get("started_at", ""))
    finished = str(document.get("finished_at", ""))
    complete = bool(document.get("complete", False))
    if not complete:
        limitations.insert(0, f"the run did not complete: {document.get('incomplete_reason')}")
    limitations[:0] = document.get("warnings", [])
    command = document.get("environment", {}).get("command") or []
    measured = {
        "schema": SCHEMA,
        "record_state": _record_state(gates, complete),
        "record_id": f"rl-conformance/{started}/{subject}",
        "framework": {
            "name": subject if adapter else "",
            "integration_artifact": integration_artifact,
            "recipe_commit": "",
            "core_commit": "",
        },
        "environment": {
            "dynamo_commit": "",
            "backend": {"name": str(target.get("backend", "vllm")), "version": ""},
            "container_image": "",
            "container_image_digest": "",
            "cuda_version": "",
            "driver_version": "",
            "model": {
                "name": str(target.get("model") or ""),
                "revision": "",
                "tokenizer_revision": "",
            },
            "artifacts": [bundle_uri("matrix.json")],
        },
        "hardware": {
            "nodes": 0,
            "gpu_model": "",
            "gpus_per_node": 0,
            "interconnect": "",
            "network": "",
            "artifacts": [],
        },
        "topology": {
            "placement": "external",
            "serving_mode": serving_mode or "aggregated",
            "trainer_parallelism": {"tp": 0, "pp": 0, "dp": 0, "ep": 0},
            "rollout_parallelism": {"tp": 0, "pp": 0, "dp": 0, "ep": 0},
        },
        "owners": {"framework": "", "dynamo": "", "clean_room_reviewer": ""},
        "run": {
            "started_at": started,
            "completed_at": finished,
            "commands": [shlex.join(command)] if command else [],
            "artifact_root": str(directory.resolve()),
        },
        "gates": gates,
        "limitations": limitations,
        "last_validated": finished if complete else "",
    }
    version = _backend_version(target)
    if version:
        measured["environment"]["backend"]["version"] = version
    record, defaulted = merged(measured, meta or {})
    if serving_mode is None and "topology.serving_mode" in defaulted:
        record["limitations"].append(
            "topology.serving_mode: not observed, the template's value stands "
            "(give it with --record-meta)"
        )
    if "topology.placement" in defaulted:
        record["limitations"].append(
            "topology.placement: the trainer's placement is not observable from the serving "
            "side; `external` stands (give it with --record-meta)"
        )
    unrecorded = sorted(defaulted - {"topology.serving_mode", "topology.placement"})
    if unrecorded:
        record["limitations"].append(
            "not recorded (only the user knows them; give them with --record-meta): "
            + ", ".join(unrecorded)
        )
    return record


def subjects(document: Mapping[str, Any]) -> list[str]:
    return [str(target["id"]) for target in document.get("targets", [])]


def write_validation_records(
    document: Mapping[str, Any],
    directory: Path,
    meta: Mapping[str, Any] | None = None,
    integration_artifacts: Mapping[str, str] | None = None,
) -> list[Path]:
    """`validation/<subject>.json` for every deployment or adapter of the matrix."""
    written = []
    for subject in subjects(document):
        record = validation_record(
            document, subject, directory, meta, (integration_artifacts or {}).get(subject, "")
        )
        path = directory / VALIDATION_DIR / f"{safe_name(subject)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(record, indent=2) + "\n")
        written.append(path)
    return written
