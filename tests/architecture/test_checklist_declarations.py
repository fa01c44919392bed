"""The adapter checklist is declared once, in `rl_conformance/contract/adapter.py`: each item's
id, title, level, section, sentence, half and what exercises it there and nowhere else; each item
has one judge, registered on it; the checklist, its halves and the adapter matrix's rows are
derived from the declarations; and the certification kit never types an item's id, title or
sentence again."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rl_conformance import contract
from rl_conformance.certify import protocol
from rl_conformance.certify.checklist import CHECKS, GENERATION_ITEMS, half_of
from rl_conformance.certify.evidence import Evidence
from rl_conformance.certify.findings import JUDGES, Ruling, judges, passed
from rl_conformance.certify.runner import ITEM_CAPABILITIES
from rl_conformance.contract import adapter
from rl_conformance.contract.kinds import ChecklistItem, Half
from rl_conformance.model.matrix import Outcome
from rl_conformance.reports.validation_gates import ADAPTER_GATES

PACKAGE = Path(__file__).resolve().parents[2] / "rl_conformance"
HOME = PACKAGE / "contract" / "adapter.py"
KIT = ("certify", "cli")
"""Where an item is only ever named by its declaration."""
ITEM_ID = re.compile(r"\badapter\.(?!py\b)[a-z][a-z_]*[a-z]\b")
"""An item's id as a string spells it (not `adapter.py`, the module's file)."""


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    """Every string constant of a module (f-strings' literal parts too), with its line."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def _modules(*folders: str) -> list[Path]:
    roots = [PACKAGE / folder for folder in folders] if folders else [PACKAGE]
    return sorted(p for root in roots for p in root.rglob("*.py") if p != HOME)


def test_each_item_is_declared_once_under_its_name() -> None:
    declared = [value for value in vars(adapter).values() if isinstance(value, ChecklistItem)]
    assert declared == list(adapter.ITEMS), "an item declared but missing from ITEMS, or twice"
    assert len(adapter.BY_ID) == len(adapter.ITEMS), "an id declared twice"
    for item in adapter.ITEMS:
        prefix, name = item.id.split(".", 1)
        assert prefix == "adapter" and item.row.area == "adapter", item.id
        assert getattr(adapter, name.upper()) is item, item.id
        assert item.row.title and item.row.quote and item.row.section, item.id
        assert item.exercised_by, f"{item.id} names nothing that would exercise it"
    assert not set(adapter.BY_ID) & set(contract.BY_ID), "an item has a deployment row's id"


def test_each_item_has_one_judge_registered_on_it() -> None:
    assert list(CHECKS) == [item.id for item in adapter.ITEMS]
    assert set(JUDGES) == set(CHECKS), "a judge registered on no item of the checklist"
    for item in adapter.ITEMS:
        assert CHECKS[item.id].item is item, item.id


def test_a_second_judge_for_an_item_is_refused() -> None:
    def another(evidence: Evidence) -> Ruling:
        return passed("anything")

    with pytest.raises(ValueError, match=r"adapter\.single_admission.* has two judges"):
        judges(adapter.SINGLE_ADMISSION)(another)
    assert CHECKS[adapter.SINGLE_ADMISSION.id] is JUDGES[adapter.SINGLE_ADMISSION.id]


def test_the_checklist_and_the_adapter_matrix_are_derived_from_the_declarations() -> None:
    assert tuple(item.row for item in adapter.ITEMS) == ITEM_CAPABILITIES
    assert all(row is item.row for row, item in zip(ITEM_CAPABILITIES, adapter.ITEMS, strict=True))
    assert {item.id for item in adapter.ITEMS if item.half is Half.GENERATION} == GENERATION_ITEMS
    assert all(half_of(item.id) is item.half for item in adapter.ITEMS)


def test_the_halves_are_the_words_an_adapter_declares() -> None:
    """The protocol imports nothing of the harness, so it spells the halves itself."""
    assert (Half.GENERATION.value, Half.REFRESH.value) == (protocol.GENERATION, protocol.REFRESH)


def test_a_finding_speaks_the_matrix_s_outcomes() -> None:
    """One vocabulary: a finding's outcome is an `Outcome`; `not-applicable` is the one value no
    cell takes (its cell is `unsupported`)."""
    assert Outcome.NOT_APPLICABLE.value == "not-applicable"
    for outcome in ("pass", "fail", "skipped"):
        assert Outcome(outcome).value == outcome


def test_the_kit_never_types_an_items_id_title_or_sentence_again() -> None:
    said = {item.row.title for item in adapter.ITEMS} | {item.row.quote for item in adapter.ITEMS}
    said |= {item.exercised_by for item in adapter.ITEMS}
    typed = [
        f"{path.relative_to(PACKAGE)}:{line}: {value[:60]!r}"
        for path in _modules(*KIT)
        for line, value in _strings(path)
        if ITEM_ID.search(value) or value in said
    ]
    assert not typed, "name the item (contract.adapter.NAME) instead: " + "; ".join(typed)


def test_every_item_id_named_elsewhere_is_declared() -> None:
    """The reports' gate table names inputs by id, as it names the deployment's rows: each must
    be an item of the checklist."""
    unknown = [
        f"{path.relative_to(PACKAGE)}:{line}: {found}"
        for path in _modules()
        for line, value in _strings(path)
        for found in ITEM_ID.findall(value)
        if found not in adapter.BY_ID
    ]
    assert not unknown, "names no checklist item: " + "; ".join(unknown)
    for gate in ADAPTER_GATES:
        assert {put.capability for put in gate.inputs} <= set(adapter.BY_ID), gate.name
