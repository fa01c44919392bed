"""The route-probe checks judge what the listener must do, never how it words its own errors."""

from __future__ import annotations

from rl_conformance.checks import probes

from . import bodies
from .probe_cases import HUNG, refused, with_second


def test_a_refusal_without_an_error_or_with_routes_fails_closed_never() -> None:
    assert not probes.probe_refusal_listed(with_second(routes=[]), HUNG, "x").passed
    assert not probes.probe_refusal_listed(bodies.discovery(), HUNG, "x").passed
    withheld = refused()
    withheld["workers"][1]["world_size"] = 1
    assert not probes.probe_refusal_listed(withheld, HUNG, "x").passed
    assert not probes.probe_refusal_listed(bodies.discovery(), 1, "x").passed  # not listed


def test_any_wording_of_the_listeners_own_error_passes() -> None:
    assert probes.probe_refusal_listed(refused("probe failed: bad reply"), HUNG, "x").passed
