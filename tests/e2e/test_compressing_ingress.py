"""A frontend behind an ingress that compresses its JSON and event streams (a legal transport)
gets the verdicts the same frontend gets without it: a whole read-only run by URL has no `fail`
or `error` cell that the plain fake passes."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from fake_backends import FakeDeployment
from rl_conformance.client.codings import ACCEPT_ENCODING

from .legal_variants import cells_by_url, newly_failing

pytestmark = pytest.mark.slow


def compressed(fleet: FakeDeployment) -> str | None:
    """The coding the frontend answers the suite's own `Accept-Encoding` in."""
    reply = httpx.get(
        fleet.frontend_url + "/v1/models",
        headers={"accept-encoding": ACCEPT_ENCODING},
        trust_env=False,
    )
    return reply.headers.get("content-encoding")


def test_a_gzipping_ingress_fails_nothing_the_plain_frontend_passes(tmp_path: Path) -> None:
    with FakeDeployment("vllm", workers=2) as plain:
        expected = cells_by_url(plain, tmp_path / "plain", "--examples", "2")
    with FakeDeployment("vllm", workers=2, ingress_coding="gzip") as gzipping:
        assert compressed(gzipping) == "gzip"
        observed = cells_by_url(gzipping, tmp_path / "gzip", "--examples", "2")
    assert not newly_failing(expected, observed)
    passed = [cap for cap, cell in expected.items() if cell["outcome"] == "pass"]
    assert passed and all(observed[cap]["outcome"] == "pass" for cap in passed), {
        cap: observed[cap]["reason"] for cap in passed if observed[cap]["outcome"] != "pass"
    }
