"""docs/COVERAGE.md is generated from fixtures/spec/requirements.json and kept in step with it;
the requirements name only registered capabilities and checklist items, name every capability,
and give each sentence its judges or the reason it has none."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fake_backends import FAULT_NAMES
from rl_conformance.certify.checklist import CHECKS
from rl_conformance.certify.twins import TWINS
from rl_conformance.checks.base import REGISTRY
from rl_conformance.cli import main
from rl_conformance.model.capabilities import CAPABILITIES
from rl_conformance.reports.coverage import (
    ADAPTER_PREFIX,
    COMMAND,
    REQUIREMENTS,
    anchor,
    counts,
    load_requirements,
    render_coverage,
    sentences_of,
)

ROOT = Path(__file__).resolve().parents[2]
CAPABILITY_IDS = {capability.id for capability in CAPABILITIES}
FLIPS = json.loads((ROOT / "fixtures" / "expected" / "kill-matrix-flips.json").read_text())["flips"]


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return load_requirements(ROOT / REQUIREMENTS)


def judges(document: dict[str, Any]) -> set[str]:
    return {judge for row in sentences_of(document) for judge in row["judged_by"]}


def test_the_coverage_document_matches_the_requirements(document: dict[str, Any]) -> None:
    committed = (ROOT / "docs" / "COVERAGE.md").read_text(encoding="utf-8")
    assert committed == render_coverage(document, CAPABILITIES), f"regenerate: {COMMAND}"


def test_the_command_prints_the_document(
    document: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["coverage", "--markdown"]) == 0
    assert capsys.readouterr().out == render_coverage(document, CAPABILITIES)
    assert main(["coverage"]) == 0
    total = counts(sentences_of(document))
    assert f"{total['sentences']} sentences" in capsys.readouterr().out


def test_an_unreadable_requirements_file_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["coverage", "--requirements", str(tmp_path / "absent.json")]) == 2


def test_every_judge_is_a_registered_capability_or_checklist_item(
    document: dict[str, Any],
) -> None:
    unknown = sorted(
        judge
        for judge in judges(document)
        if judge not in (CHECKS if judge.startswith(ADAPTER_PREFIX) else CAPABILITY_IDS)
    )
    assert not unknown, f"not in the registry or the adapter checklist: {unknown}"


def test_every_capability_is_named_or_excused(document: dict[str, Any]) -> None:
    excused = document.get("unnamed_capabilities") or {}
    assert set(excused) <= CAPABILITY_IDS
    assert all(isinstance(reason, str) and reason.strip() for reason in excused.values())
    assert not set(excused) & judges(document), "an excused capability is named by a sentence"
    unnamed = sorted(CAPABILITY_IDS - judges(document) - set(excused))
    assert not unnamed, (
        f"no sentence names {unnamed}: add it to a sentence's judged_by, or give the reason "
        "under unnamed_capabilities"
    )


def test_every_sentence_has_judges_or_a_reason(document: dict[str, Any]) -> None:
    for row in sentences_of(document):
        reason = row["not_covered"]
        if row["judged_by"]:
            assert reason is None, f"{row['id']}: judged, yet 'not covered'"
        else:
            assert reason and reason.strip(), f"{row['id']}: no judge and no reason"
            assert row["partly"] is None, f"{row['id']}: 'partly' without a judge"


def test_ids_and_sentences_are_unique(document: dict[str, Any]) -> None:
    rows = sentences_of(document)
    for name, values in (
        ("id", [row["id"] for row in rows]),
        ("sentence", [row["sentence"] for row in rows]),
    ):
        repeated = [value for value, n in Counter(values).items() if n > 1]
        assert not repeated, f"repeated {name}: {repeated}"
    assert all(row["section"] and row["sentence"].strip() for row in rows)
    assert all(len(set(row["judged_by"])) == len(row["judged_by"]) for row in rows)


def test_capability_links_reach_headings_of_the_capability_reference() -> None:
    reference = (ROOT / "docs" / "CAPABILITIES.md").read_text(encoding="utf-8")
    for capability in CAPABILITIES:
        heading = f"### `{capability.id}` ({capability.level.value})"
        assert heading in reference, f"docs/CAPABILITIES.md has no heading {heading!r}"
    first = CAPABILITIES[0]
    assert (first.id, anchor(first)) == (
        "discovery.protocol_version",
        "discoveryprotocol_version-must",
    ), "GitHub's anchor of '### `discovery.protocol_version` (MUST)'"


def test_each_product_gap_named_is_in_dynamos_register(document: dict[str, Any]) -> None:
    """A sentence names only gaps of the register upstream defines (`rl_product_gaps.json`, its
    commit recorded in fixtures/upstream/rl-artifact-bundle.json), and only a sentence that is
    left open (partly or not covered): a gap is what leaves it open."""
    register = document["product_gaps"]
    assert sorted(register["gaps"]) == [f"DYN-RL-GAP-00{n}" for n in range(1, 6)]
    upstream = json.loads((ROOT / "fixtures" / "upstream" / "rl-artifact-bundle.json").read_text())
    commits = {source["path"]: source["commit"] for source in upstream["sources"]}
    assert commits["docs/fern/scripts/rl_product_gaps.json"] in register["source"]
    for sentence in sentences_of(document):
        for gap in sentence["product_gaps"]:
            assert gap in register["gaps"], (sentence["id"], gap)
            assert sentence["partly"] or not sentence["judged_by"], sentence["id"]
    coverage = (ROOT / "docs" / "COVERAGE.md").read_text()
    assert all(f"| {gap} | {title} |" in coverage for gap, title in register["gaps"].items())


def test_each_reported_failure_has_a_check_and_a_fault_that_flips_its_row(
    document: dict[str, Any],
) -> None:
    """A failure the document says is judged names a registered check, the row it belongs to,
    and a fault that row is reviewed to be flipped by (a trainer's side: a checklist item and
    one of its twins)."""
    failures = document["reported_failures"]
    assert failures
    rows = {capability.id: capability for capability in CAPABILITIES}
    for item in failures:
        if item["row"].startswith(ADAPTER_PREFIX):
            assert item["row"] in CHECKS and item["check"] == item["row"], item
            assert item["fault"] in TWINS, item
            continue
        assert item["check"] in REGISTRY, item
        assert item["fault"] in FAULT_NAMES, item
        assert item["fault"] in rows[item["row"]].flipped_by, item
        assert item["row"] in FLIPS[item["fault"]], item
