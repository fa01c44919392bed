"""Dynamo's run record, filled only from what a run measured: gates follow the verdicts behind
them, what only the user knows comes from --record-meta (checked field by field), and the bundle
index tells any edit of the report directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.errors import ConfigurationError
from rl_conformance.model.capabilities import CAPABILITIES
from rl_conformance.model.matrix import Outcome, RunInfo, TestRecord, build_matrix, now
from rl_conformance.model.record_meta import check_record_meta, load_record_meta
from rl_conformance.model.target import Target
from rl_conformance.reports import write_reports
from rl_conformance.reports.bundle import verify_index, write_index
from rl_conformance.reports.evidence import write_records
from rl_conformance.reports.record_rules import (
    judged_gate_findings,
    publication_findings,
    structure_findings,
)
from rl_conformance.reports.validation import validation_record
from rl_conformance.reports.validation_gates import DEPLOYMENT_GATES, render_markdown

SHA = "0123456789abcdef0123456789abcdef01234567"
META: dict[str, Any] = {
    "record_id": "nightly-42",
    "framework": {
        "name": "verl",
        "integration_artifact": "verl-recipe/dynamo",
        "recipe_commit": SHA,
        "core_commit": SHA,
    },
    "environment": {
        "dynamo_commit": SHA,
        "container_image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1",
        "container_image_digest": "sha256:" + "ab" * 32,
        "cuda_version": "12.9",
        "driver_version": "575.57",
        "model": {"revision": "r1", "tokenizer_revision": "r1"},
        "artifacts": ["artifact://bundle/matrix.md"],
    },
    "hardware": {
        "nodes": 1,
        "gpu_model": "H100",
        "gpus_per_node": 8,
        "interconnect": "NVLink",
        "network": "IB",
        "artifacts": ["artifact://bundle/matrix.md"],
    },
    "topology": {
        "placement": "external",
        "serving_mode": "aggregated",
        "trainer_parallelism": {"tp": 1, "pp": 1, "dp": 1, "ep": 1},
        "rollout_parallelism": {"tp": 1, "pp": 1, "dp": 1, "ep": 1},
    },
    "owners": {"framework": "ana", "dynamo": "bo", "clean_room_reviewer": "cy"},
}


def matrix_document(outcomes: dict[str, Outcome], measured: dict[str, Any] | None = None) -> Any:
    target = Target(
        "fake-vllm", "vllm", "fake", "http://127.0.0.1:1", model="toy", versions={"vllm": "0.31.0"}
    )
    target.topology = {"disaggregated": False}
    default = Outcome.PASS
    records = [
        TestRecord(
            f"test_{capability.id}",
            (capability.id,),
            "fake-vllm",
            outcomes.get(capability.id, default),
            "why not" if outcomes.get(capability.id, default) is not Outcome.PASS else "",
            measured=(measured or {}).get(capability.id, {}),
        )
        for capability in CAPABILITIES
    ]
    started = now()
    return build_matrix(CAPABILITIES, [target], records, RunInfo(started, now(), True, 7)).to_json()


MEASURED = {
    "refresh.version_verified": {
        "policy_update": {"target_version": "v3", "workers_targeted": 2, "workers_verified": 2}
    },
    "telemetry.trace_correlation": {
        "trace_correlation": {
            "counts": {
                "framework_attempts": 3,
                "joined_payloads": 3,
                "expected_terminals": 3,
                "joined_terminals": 3,
            }
        }
    },
}


def record_of(tmp_path: Path, outcomes: dict[str, Outcome], **kwargs: Any) -> dict[str, Any]:
    document = matrix_document(outcomes, MEASURED)
    return validation_record(document, "fake-vllm", tmp_path, **kwargs)


def test_a_clean_run_passes_every_gate_it_judged(tmp_path: Path) -> None:
    record = record_of(tmp_path, {}, meta=META)
    assert structure_findings(record) == []
    assert record["record_state"] == "passed"
    statuses = {name: gate["status"] for name, gate in record["gates"].items()}
    assert statuses.pop("training_iteration") == "not_run"
    assert set(statuses.values()) == {"passed"}
    update = record["gates"]["policy_update"]
    assert (update["target_version"], update["workers_verified"], update["cache_handling"]) == (
        "v3",
        2,
        "invalidated",
    )
    assert record["gates"]["trace_correlation"]["joined_terminals"] == 3
    assert record["environment"]["backend"]["version"] == "0.31.0"
    assert judged_gate_findings(record) == []
    assert "gates.training_iteration.status: passed" in publication_findings(record)
    for gate in record["gates"].values():
        assert all(
            uri.startswith("artifact://bundle/cells/fake-vllm/") for uri in gate["artifacts"]
        )
        for uri in gate["artifacts"]:
            assert (tmp_path / uri.removeprefix("artifact://bundle/")).is_file()


def test_a_failed_capability_fails_its_gate_and_the_record(tmp_path: Path) -> None:
    record = record_of(tmp_path, {"logprobs.selected_alignment": Outcome.FAIL})
    token = record["gates"]["token_logprob"]
    assert token["status"] == "failed"
    assert token["completion_logprobs_aligned"] is False
    assert token["exact_completion_token_ids"] is True
    assert record["record_state"] == "failed"


def test_what_was_not_judged_is_not_run_and_said_so(tmp_path: Path) -> None:
    record = record_of(
        tmp_path,
        {
            "refresh.served_policy_verified": Outcome.SKIPPED,
            "logprobs.prompt_alignment": Outcome.UNSUPPORTED,
            "errors.validation": Outcome.ERROR,
        },
    )
    assert record["gates"]["policy_update"]["status"] == "not_run"
    assert record["gates"]["policy_update"]["post_update_generation"] is False
    assert record["gates"]["failure_recovery"]["status"] == "not_run"
    token = record["gates"]["token_logprob"]
    assert (token["status"], token["prompt_logprobs"]) == ("passed", "not_applicable")
    said = "\n".join(record["limitations"])
    assert "refresh.served_policy_verified: skipped (why not)" in said
    assert "errors.validation: error" in said
    assert "not recorded" in said and "environment.dynamo_commit" in said
    assert record["record_state"] == "passed"


def test_a_run_that_did_not_complete_never_passes(tmp_path: Path) -> None:
    document = matrix_document({}, MEASURED)
    document["complete"] = False
    document["incomplete_reason"] = "--run-timeout 60 s elapsed"
    record = validation_record(document, "fake-vllm", tmp_path)
    assert record["record_state"] == "planned"
    assert record["last_validated"] == ""
    assert "--run-timeout" in record["limitations"][0]


def test_every_gate_input_is_a_registered_capability() -> None:
    known = {capability.id for capability in CAPABILITIES}
    for gate in DEPLOYMENT_GATES:
        assert {item.capability for item in gate.inputs} <= known, gate.name


@pytest.mark.parametrize(
    ("meta", "says"),
    [
        (
            {"hardware": {"nodes": "two"}},
            "hardware.nodes: expected an integer >= 1, observed 'two'",
        ),
        ({"framework": {"core_commit": "main"}}, "framework.core_commit: expected a full lower"),
        ({"topology": {"placement": "near"}}, "topology.placement: expected one of colocated"),
        ({"gates": {}}, "gates: measured by the run, never given"),
        ({"hardware": {"gpu": "H100"}}, "hardware.gpu: not a field the user records"),
        ({"environment": {"container_image_digest": "latest"}}, "an immutable digest"),
        ([1], "the file: expected an object"),
    ],
)
def test_wrong_metadata_is_refused_naming_the_field(meta: Any, says: str) -> None:
    with pytest.raises(ConfigurationError, match="--record-meta") as raised:
        check_record_meta(meta)
    assert says in str(raised.value)


def test_metadata_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "meta.json"
    path.write_text("{not json")
    with pytest.raises(ConfigurationError, match=f"--record-meta {path}: not JSON"):
        load_record_meta(path)
    with pytest.raises(ConfigurationError, match="cannot read it"):
        load_record_meta(tmp_path / "absent.json")


def test_what_the_deployment_showed_stands_over_the_metadata(tmp_path: Path) -> None:
    meta = {"environment": {"backend": {"version": "0.99"}}, "limitations": ["pinned by hand"]}
    record = record_of(tmp_path, {}, meta=meta)
    assert record["environment"]["backend"]["version"] == "0.31.0"
    assert "pinned by hand" in record["limitations"]
    assert any("--record-meta said '0.99'" in line for line in record["limitations"])


def test_the_bundle_index_tells_every_edit(tmp_path: Path) -> None:
    document = matrix_document({"tokens.completion_ids": Outcome.FAIL}, MEASURED)
    write_reports(document, tmp_path)
    write_records(tmp_path, document, META)
    digest = write_index(tmp_path)
    assert verify_index(tmp_path, digest) == []
    index = json.loads((tmp_path / "bundle.json").read_text())
    assert index["closure_status"] == "complete"
    assert [entry["path"] for entry in index["records"]] == ["validation/fake-vllm.json"]
    (tmp_path / "matrix.md").write_text("edited")
    (tmp_path / "extra.txt").write_text("added")
    (tmp_path / "junit.xml").unlink()
    (tmp_path / "link.json").symlink_to(tmp_path / "matrix.json")
    findings = verify_index(tmp_path)
    assert "matrix.md: changed (sha256 differs from the index)" in findings
    assert "extra.txt: added after the index was written" in findings
    assert "junit.xml: in the index, missing from the directory" in findings
    assert "link.json: a symbolic link (refused)" in findings
    assert verify_index(tmp_path, "0" * 64)[0].startswith("bundle.json: its sha256 is")


def test_a_record_naming_a_file_outside_the_bundle_leaves_it_open(tmp_path: Path) -> None:
    document = matrix_document({}, MEASURED)
    write_reports(document, tmp_path)
    meta = {"hardware": {"artifacts": ["artifact://bundle/gpu-inventory.txt", "s3://x/y"]}}
    write_records(tmp_path, document, meta)
    write_index(tmp_path)
    index = json.loads((tmp_path / "bundle.json").read_text())
    assert index["closure_status"] == "incomplete"
    assert index["missing_uris"] == ["artifact://bundle/gpu-inventory.txt"]
    assert index["external_uris"] == ["s3://x/y"]


def test_the_documented_gate_table_is_the_code() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "EVIDENCE.md").read_text()
    block = text.split("validation_gates.py -->\n", 1)[1].split("<!-- end of gate table -->")[0]
    assert block == render_markdown(), "regenerate the table in docs/EVIDENCE.md"
