"""Which release a target is judged as: a known release, a build that leads to one, else main."""

from __future__ import annotations

import pytest

from rl_conformance.model.releases import (
    FLAG_SOURCE,
    LAUNCHER_SOURCE,
    MAIN,
    OBSERVED_SOURCE,
    RELEASES,
    SURFACES,
    has_request_check,
    judged_as,
    release_text,
)


@pytest.mark.parametrize(
    ("release", "basis"),
    [
        ("1.6.1", "1.6.1"),
        ("1.7.0", "1.7.0"),
        ("1.7.0.dev20261026", "1.7.0"),  # the wheel's PEP 440 version
        ("1.7.0-dev20261026", "1.7.0"),  # the 1.7 frontend's OpenAPI info.version
        ("1.7.0rc1", "1.7.0"),
        ("v1.7.0", "1.7.0"),
        ("1.6.2", MAIN),  # no evidence about it: judged by the spec's release
        ("1.7.1.dev1", MAIN),
        ("1.7.0-custom", MAIN),
        ("", MAIN),
        ("main", MAIN),
    ],
)
def test_a_build_is_judged_as_the_release_it_leads_to(release: str, basis: str) -> None:
    assert judged_as(release) == basis


def test_the_report_says_a_build_was_judged_as_its_release() -> None:
    text = release_text("1.7.0-dev20261026", OBSERVED_SOURCE, "frontend GET /openapi.json")
    assert text == (
        "Dynamo 1.7.0-dev20261026 (observed: frontend GET /openapi.json; judged as 1.7.0)"
    )
    assert release_text("1.7.0", FLAG_SOURCE) == (
        "Dynamo 1.7.0 (declared with --dynamo-release, not observed)"
    )
    assert "judged as" not in release_text("1.6.1", LAUNCHER_SOURCE)


ABSENT = {"1.6.1": {"sidecar.engine_recovery"}}
"""The surfaces a release lacks (its capabilities are `unsupported` there), measured: 1.6.1's
sidecar does not restart a dead engine (the 1.7.0 release notes introduce it)."""


def test_every_surface_states_its_evidence_for_every_release_that_has_it() -> None:
    """A surface a release lacks has no entry for it; every other release states its evidence."""
    for surface in SURFACES:
        lacking = {release for release in RELEASES if surface.id in ABSENT.get(release, ())}
        assert set(surface.present) == set(RELEASES) - lacking, surface.id
        assert all(evidence.strip() for evidence in surface.present.values()), surface.id


def test_the_native_input_id_refusal_is_judged_from_1_7_0_on() -> None:
    surface = "sglang.native_input_ids_validated"
    assert not has_request_check("1.6.1", surface)
    assert has_request_check("1.7.0-dev20261026", surface)
    assert has_request_check("0.9.0", surface)  # unknown: judged as main, the spec's release
