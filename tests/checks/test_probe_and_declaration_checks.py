"""The route-probe checks judge what the listener must do, never how it words its own errors;
the declaration check tells a null declaration from an absent one."""

from __future__ import annotations

from rl_conformance.checks import probes
from rl_conformance.checks.declaration import Declared, version_declaration
from rl_conformance.checks.recovery import crashed_stream_not_clean
from rl_conformance.checks.terminal import Ending

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


def test_a_null_declaration_is_not_an_absent_one() -> None:
    declared_null = {"status": "ok", "version": None, "version_declared": True}
    assert version_declaration([Declared("get", declared_null, None, True)]).passed
    for reply in ({"status": "ok", "version_declared": True}, {"status": "ok", "version": None}):
        assert not version_declaration([Declared("get", reply, None, True)]).passed
    one = {"status": "ok", "version": 1, "version_declared": True}
    assert not version_declaration([Declared("get", one, True, True)]).passed


def test_a_migrated_stream_that_completed_is_no_clean_short_stop() -> None:
    done = Ending(finish_reason="length", completion_ids=list(range(512)))
    assert crashed_stream_not_clean("success", done, 512).passed
    unknown = Ending(finish_reason="stop", completion_ids=None)
    assert not crashed_stream_not_clean("success", unknown, 512).passed
