"""Every fail cell names the sentence it violates: a check that can fail a cell quotes a
normative sentence of the spec (`fixtures/spec/requirements.json`); a check no sentence fixes is
a release difference (`normative=False`), flagged on its cell and never a failure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rl_conformance.checks import errors
from rl_conformance.checks.base import REGISTRY, RELEASE_BEHAVIOUR, CheckSpec, Level
from rl_conformance.model.capabilities import get
from rl_conformance.model.matrix import Evidence, Outcome, TestRecord, build_cell
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import ConformanceFailure, Verdict

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = [
    row["sentence"]
    for row in json.loads((ROOT / "fixtures" / "spec" / "requirements.json").read_text())[
        "sentences"
    ]
]


def normal(text: str) -> str:
    """Text compared without its markup: lower case, no backticks or quotes, a table row's
    cells joined by spaces, runs of space as one."""
    text = text.lower().replace("\u2019", "'").replace("`", "").replace('"', "").replace(" | ", " ")
    text = re.sub(r"[^a-z0-9_/.\-' ]+", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def clauses(quote: str) -> list[str]:
    """The quote's sentences and clauses of four words or more, without its parentheses (where
    a check names its upstream source)."""
    bare = re.sub(r"\([^()]*\)", "", quote)
    parts = re.split(r"(?<=[.;:])\s+", bare)
    found = [normal(part).rstrip(".;: ") for part in parts]
    return [part for part in found if len(part.split()) >= 4]


NORMAL_SENTENCES = [normal(sentence) for sentence in SENTENCES]


def cited(spec: CheckSpec) -> bool:
    return any(part in sentence for part in clauses(spec.spec) for sentence in NORMAL_SENTENCES)


def test_every_check_that_can_fail_a_cell_quotes_a_spec_sentence() -> None:
    uncited = sorted(
        f"{check_id}: {found.spec.spec[:80]}"
        for check_id, found in REGISTRY.items()
        if found.spec.normative and not cited(found.spec)
    )
    assert not uncited, "a failure must name the sentence it violates:\n" + "\n".join(uncited)


def test_a_check_no_sentence_fixes_says_so_and_names_its_recorded_evidence() -> None:
    differences = [found.spec for found in REGISTRY.values() if not found.spec.normative]
    assert differences, "errors.context_window_refused at least"
    for spec in differences:
        assert spec.section == RELEASE_BEHAVIOUR, spec.id
        assert not cited(spec), f"{spec.id} quotes a sentence: it is a failure, not a difference"
        named = re.findall(r"fixtures/[\w./+-]+", spec.spec)
        assert named and all((ROOT / path.rstrip(".;)")).exists() for path in named), spec.id


def test_the_rule_sees_a_quote_that_is_not_the_specs() -> None:
    invented = CheckSpec("x.y", "t", Level.MUST, "Preserve the engine's exact ids.", "s")
    assert not cited(invented)
    row = CheckSpec("x.z", "t", Level.MUST, errors.status_and_body.spec.spec, "s")
    assert cited(row)


def test_a_release_difference_is_recorded_and_a_failure_is_raised() -> None:
    verdict = Verdict()
    served = verdict.check(errors.context_window_refused(200))
    assert verdict.differs(served) and verdict.differences == [(served, None)]
    assert not verdict.differs(verdict.check(errors.context_window_refused(400)))
    with pytest.raises(ConformanceFailure):
        verdict.check(errors.status_and_body(200, {}, 400))


def test_a_cell_with_only_a_difference_passes_flagged_with_its_evidence() -> None:
    capability = get("errors.validation")
    target = Target("t", "vllm", "external", "http://127.0.0.1:1")
    flagged = Evidence("errors.context_window_refused", "served", "status", 400, 200, "curl x")
    records = [
        TestRecord("a", (capability.id,), "t", Outcome.PASS, differences=[flagged]),
        TestRecord("b", (capability.id,), "t", Outcome.PASS),
    ]
    cell = build_cell(capability, target, records).to_json()
    assert cell["outcome"] == "pass" and not cell["contradicts_documentation"]
    assert cell["release_differences"][0]["observed"] == 200
    assert cell["evidence"] == []
    plain = build_cell(capability, target, records[1:]).to_json()
    assert "release_differences" not in plain  # matrix.json's existing fields stay as they were
    assert TestRecord.from_json(records[0].to_json()).differences == [flagged]
