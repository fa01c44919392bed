"""A frontend behind an ingress that compresses its JSON and event streams (a legal transport)
gets the verdicts the same frontend gets without it: a whole read-only run by URL has no `fail`
or `error` cell that the plain fake passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_backends import FakeDeployment
from rl_conformance.client.codings import ACCEPT_ENCODING

from .test_launch_mode_equivalence import by_url, cells, run

pytestmark = pytest.mark.slow


def run_by_url(fleet: FakeDeployment, directory: Path) -> dict[str, dict[str, Any]]:
    return cells(run(directory, *by_url(fleet, workers=False), "--examples", "2"))


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
        expected = run_by_url(plain, tmp_path / "plain")
    with FakeDeployment("vllm", workers=2, ingress_coding="gzip") as gzipping:
        assert compressed(gzipping) == "gzip"
        observed = run_by_url(gzipping, tmp_path / "gzip")
    broken = {
        capability: (cell["outcome"], cell["reason"])
        for capability, cell in observed.items()
        if cell["outcome"] in ("fail", "error")
        and expected[capability]["outcome"] not in ("fail", "error")
    }
    assert not broken
    passed = [cap for cap, cell in expected.items() if cell["outcome"] == "pass"]
    assert passed and all(observed[cap]["outcome"] == "pass" for cap in passed), {
        cap: observed[cap]["reason"] for cap in passed if observed[cap]["outcome"] != "pass"
    }
