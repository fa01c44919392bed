"""Each capability row is declared once, in `rl_conformance/contract/<area>.py`, and every place
derived from it agrees: its own check carries the row's level, section and sentence; the faults
it declares as made to break it are reviewed to flip it; each fault has one such home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rl_conformance.checks  # noqa: F401 (registers every check)
from fake_backends import FAULT_NAMES
from rl_conformance import contract
from rl_conformance.checks.base import REGISTRY, check
from rl_conformance.contract.kinds import Capability

ROOT = Path(__file__).resolve().parents[2]


def reviewed_flips() -> dict[str, list[str]]:
    path = ROOT / "fixtures" / "expected" / "kill-matrix-flips.json"
    return json.loads(path.read_text(encoding="utf-8"))["flips"]


def test_each_area_declares_its_own_rows_under_their_names() -> None:
    for area in contract.AREAS:
        name = area.__name__.rsplit(".", 1)[1]
        for row in area.ROWS:
            assert row.area == name, f"{row.id} is declared in contract/{name}.py"
            assert getattr(area, row.id.split(".", 1)[1].upper()) is row, row.id
        declared = [value for value in vars(area).values() if isinstance(value, Capability)]
        assert len(declared) == len(area.ROWS), f"contract/{name}.py: a row missing from ROWS"
    assert len(contract.BY_ID) == len(contract.CAPABILITIES), "an id declared twice"


def test_a_rows_own_check_says_what_the_row_says() -> None:
    own = [row for row in contract.CAPABILITIES if row.id in REGISTRY]
    assert len(own) >= 40, "the rows' own checks are not registered"
    for row in own:
        found = REGISTRY[row.id]
        spec = found.spec
        assert (spec.level, spec.section, spec.spec) == (row.level, row.section, row.quote), row.id
        assert spec.title == row.statement, row.id


def test_a_check_with_a_rows_id_cannot_be_declared_apart_from_it() -> None:
    with pytest.raises(ValueError, match=r"declare it as check\(contract"):
        check("tokens.completion_ids", title="t", spec="s", section="x")
    with pytest.raises(TypeError, match="rl_conformance/contract"):
        check(contract.tokens.COMPLETION_IDS, title="another title")


def test_each_fault_has_one_home_row_that_it_is_reviewed_to_flip() -> None:
    flips = reviewed_flips()
    homes: dict[str, list[str]] = {}
    for row in contract.CAPABILITIES:
        for fault in row.flipped_by:
            assert fault in FAULT_NAMES, f"{row.id} declares {fault!r}, a fault the fakes lack"
            assert row.id in flips.get(fault, []), (
                f"{row.id} declares {fault!r} made to break it, but the reviewed kill-matrix "
                "flips (fixtures/expected/kill-matrix-flips.json) do not list it as flipped"
            )
            homes.setdefault(fault, []).append(row.id)
    twice = {fault: rows for fault, rows in homes.items() if len(rows) > 1}
    assert not twice, f"a fault is declared by more than one row: {twice}"
    homeless = sorted(set(FAULT_NAMES) - set(homes))
    assert not homeless, "no row declares these faults in flipped_by: " + ", ".join(homeless)
