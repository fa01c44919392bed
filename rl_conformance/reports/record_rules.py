"""The rules a `dynamo.rl.validation.v1` record is held to, as Dynamo's own checker states them
(`docs/fern/scripts/check_rl_validation_record.py`): its structure (`schemas/
rl-validation-record.json`, plus time order), and the stricter publication gate (full commit
SHAs, an immutable image digest, recorded hardware, parallelism and independent owners, every
gate passed with artifacts, and each gate's own conditions). Each finding names the field."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from ..checks import schema_check
from ..model.record_meta import COMMIT, DIGEST
from .validation_gates import GATE_NAMES


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def structure_findings(record: Any) -> list[str]:
    result = schema_check("rl-validation-record", record)
    if not result.passed:
        return [violation.message for violation in result.violations]
    started, completed = _time(record["run"]["started_at"]), _time(record["run"]["completed_at"])
    if started and completed and completed < started:
        return ["run.completed_at: earlier than run.started_at"]
    return []


def _filled(value: str, field: str, findings: list[str]) -> None:
    if not value.strip():
        findings.append(f"{field}: must be recorded for publication")


def _artifacts(entry: dict[str, Any], field: str, findings: list[str]) -> None:
    if not entry["artifacts"] or any(not item for item in entry["artifacts"]):
        findings.append(f"{field}.artifacts: at least one artifact URI")


def _identity(record: dict[str, Any], findings: list[str]) -> None:
    _filled(record["record_id"], "record_id", findings)
    framework, environment = record["framework"], record["environment"]
    for key in ("name", "integration_artifact"):
        _filled(framework[key], f"framework.{key}", findings)
    for key in ("recipe_commit", "core_commit"):
        if not COMMIT.fullmatch(framework[key]):
            findings.append(f"framework.{key}: a full lowercase commit SHA")
    if not COMMIT.fullmatch(environment["dynamo_commit"]):
        findings.append("environment.dynamo_commit: a full lowercase commit SHA")
    for key in ("container_image", "cuda_version", "driver_version"):
        _filled(environment[key], f"environment.{key}", findings)
    if not DIGEST.fullmatch(environment["container_image_digest"]):
        findings.append("environment.container_image_digest: an immutable sha256 digest")
    for key in ("name", "version"):
        _filled(environment["backend"][key], f"environment.backend.{key}", findings)
    for key in ("name", "revision", "tokenizer_revision"):
        _filled(environment["model"][key], f"environment.model.{key}", findings)
    _artifacts(environment, "environment", findings)


def _placement(record: dict[str, Any], findings: list[str]) -> None:
    hardware = record["hardware"]
    for key in ("nodes", "gpus_per_node"):
        if hardware[key] < 1:
            findings.append(f"hardware.{key}: at least 1")
    for key in ("gpu_model", "interconnect", "network"):
        _filled(hardware[key], f"hardware.{key}", findings)
    _artifacts(hardware, "hardware", findings)
    for group in ("trainer_parallelism", "rollout_parallelism"):
        for key, value in record["topology"][group].items():
            if value < 1:
                findings.append(f"topology.{group}.{key}: at least 1")
    owners = record["owners"]
    for key, value in owners.items():
        _filled(value, f"owners.{key}", findings)
    reviewer = owners["clean_room_reviewer"]
    if reviewer and reviewer in (owners["framework"], owners["dynamo"]):
        findings.append("owners.clean_room_reviewer: independent of the other owners")


def _run(record: dict[str, Any], findings: list[str]) -> None:
    run = record["run"]
    for key in ("started_at", "completed_at"):
        if _time(run[key]) is None:
            findings.append(f"run.{key}: a recorded ISO-8601 time")
    if not run["commands"] or any(not command for command in run["commands"]):
        findings.append("run.commands: the exact commands run")
    _filled(run["artifact_root"], "run.artifact_root", findings)
    if _time(record["last_validated"]) is None:
        findings.append("last_validated: a recorded ISO-8601 time")


def _gates(record: dict[str, Any], findings: list[str]) -> None:
    gates = record["gates"]
    for name in GATE_NAMES:
        if gates[name]["status"] != "passed":
            findings.append(f"gates.{name}.status: passed")
        _artifacts(gates[name], f"gates.{name}", findings)
    yes = {
        "token_logprob": (
            "exact_completion_token_ids",
            "completion_logprobs_aligned",
            "terminal_reasons_verified",
        ),
        "training_iteration": (
            "rollout_phase_completed",
            "reward_or_advantage_completed",
            "actor_update_completed",
            "weight_sync_completed",
            "post_update_rollout_completed",
        ),
        "policy_update": ("post_update_generation",),
        "retry_and_cancellation": (
            "duplicate_suppression_verified",
            "canceled_incomplete_sample_verified",
        ),
        "failure_recovery": (
            "request_failure_recovered",
            "worker_failure_recovered",
            "weight_update_failure_recovered",
        ),
    }
    for gate, fields in yes.items():
        for field in fields:
            if not gates[gate][field]:
                findings.append(f"gates.{gate}.{field}: true")
    if gates["token_logprob"]["prompt_logprobs"] not in ("verified", "not_applicable"):
        findings.append("gates.token_logprob.prompt_logprobs: verified or not_applicable")
    if gates["training_iteration"]["optimizer_steps"] < 1:
        findings.append("gates.training_iteration.optimizer_steps: at least 1")
    update = gates["policy_update"]
    _filled(update["target_version"], "gates.policy_update.target_version", findings)
    if update["workers_targeted"] < 1:
        findings.append("gates.policy_update.workers_targeted: at least 1")
    if update["workers_verified"] != update["workers_targeted"]:
        findings.append("gates.policy_update.workers_verified: equal to workers_targeted")
    if update["cache_handling"] == "unverified":
        findings.append("gates.policy_update.cache_handling: verified one way or another")
    trace = gates["trace_correlation"]
    if trace["framework_attempts"] < 1:
        findings.append("gates.trace_correlation.framework_attempts: at least 1")
    if trace["joined_payloads"] != trace["framework_attempts"]:
        findings.append("gates.trace_correlation.joined_payloads: equal to framework_attempts")
    if trace["joined_terminals"] != trace["expected_terminals"]:
        findings.append("gates.trace_correlation.joined_terminals: equal to expected_terminals")
    overhead = trace["trace_overhead_percent"]
    if overhead is None or overhead < 0:
        findings.append("gates.trace_correlation.trace_overhead_percent: measured, >= 0")


def publication_findings(record: Any) -> list[str]:
    findings = structure_findings(record)
    if findings:
        return findings
    if record["record_state"] != "passed":
        findings.append("record_state: passed")
    _identity(record, findings)
    _placement(record, findings)
    _run(record, findings)
    _gates(record, findings)
    return findings


UNMEASURED = ("gates.trace_correlation.trace_overhead_percent",)
"""What the suite never measures: the trace's overhead needs the same deployment with and
without tracing, a benchmark of its own."""


def judged_gate_findings(record: dict[str, Any]) -> list[str]:
    """The publication findings about the gates the run judged (not `not_run`): what a clean
    run with complete metadata must meet, the gates it could not judge and `UNMEASURED`
    aside."""
    judged = {name for name in GATE_NAMES if record["gates"][name]["status"] != "not_run"}
    pattern = re.compile(r"^gates\.([a-z_]+)\.")
    out = []
    for finding in publication_findings(record):
        found = pattern.match(finding)
        if (found and found.group(1) not in judged) or finding.startswith(UNMEASURED):
            continue
        out.append(finding)
    return out
