"""Every figure the guides state that the code can count is the code's count: how many
scenarios certify an adapter, faults the kill matrix runs, gates a run record has, fake-only
channels a test may need. (Figures a command produces by running, such as the budget a dry run
plans, are held by tests/docs/test_doc_commands.py.)"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
WORDS = {word: number for number, word in enumerate(NUMBERS, 1)}


def scenarios() -> int:
    from rl_conformance.certify.scenarios import SCENARIOS

    return len(SCENARIOS)


def faults() -> int:
    from fake_backends import FAULT_NAMES

    return len(FAULT_NAMES)


def gates() -> int:
    from rl_conformance.reports.validation_gates import GATE_NAMES

    return len(GATE_NAMES)


def channels() -> int:
    from rl_conformance.model.target import CHANNELS

    return len(CHANNELS)


FIGURES: list[tuple[str, str, Callable[[], int]]] = [
    ("docs/ADAPTERS.md", r"drives your client through (\w+) scenarios", scenarios),
    ("docs/DEPLOYMENTS.md", r"about 6 minutes for (\w+) faults", faults),
    ("docs/REPORTS.md", r"run record per deployment whose (\w+) gates", gates),
    ("docs/RUN-FLOW.md", r"the target's `probe` \((\w+) channels", channels),
]


def stated(path: str, pattern: str) -> int:
    text = " ".join((ROOT / path).read_text().split())
    found = re.findall(pattern, text)
    assert len(found) == 1, f"{path}: {pattern!r} found {len(found)} times"
    word = found[0]
    return int(word) if word.isdigit() else WORDS[word]


@pytest.mark.parametrize(
    ("path", "pattern", "count"), FIGURES, ids=[f"{path}:{n.__name__}" for path, _, n in FIGURES]
)
def test_a_stated_count_is_the_codes(path: str, pattern: str, count: Callable[[], int]) -> None:
    assert stated(path, pattern) == count(), f"{path} states another {count.__name__} count"
