"""What a seed generates in a run does not depend on how the suite was installed: hypothesis
mixes the literals of modules it deems local (ours, from an editable install) into its examples,
and a run turns that off."""

from __future__ import annotations

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import providers

import rl_conformance.model.capabilities  # noqa: F401  (literals hypothesis would find)
from rl_conformance.plugin.hypothesis_profile import (
    restore_local_constants,
    without_local_constants,
)


def examples() -> list[str]:
    seen: list[str] = []

    @seed(7)
    @settings(max_examples=200, database=None, deadline=None)
    @given(st.text(max_size=20))
    def draw(text: str) -> None:
        seen.append(text)

    draw()
    return seen


def test_a_run_generates_nothing_from_the_suites_own_source() -> None:
    original = without_local_constants()
    if original is None:
        pytest.skip("this hypothesis mixes in no local constants, or offers no way around it")
    try:
        assert len(providers._get_local_constants()) == 0
        first = examples()
        assert first == examples()
    finally:
        restore_local_constants(original)
    assert providers._get_local_constants is original
    if len(original()) == 0:
        return  # installed from a wheel: nothing of ours is local, nothing to differ
    assert examples() != first
