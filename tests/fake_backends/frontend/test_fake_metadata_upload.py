"""``nvext.metadata_upload`` as each release's frontend reads it: the fake answers every recorded
shape with the real frontend's status, and (Dynamo 1.7) its reason
(``fixtures/dynamo-1.7.0.dev20261026/metadata_upload_shapes.json``); each fault breaks one rule.

The ``@shows`` registry is shared with ``test_fake_faults``, whose completeness check imports
this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_backend_helpers import completions, faulted, shows

from fake_backends.deployment.assembly import FakeDeployment

RECORDED = json.loads(
    (
        Path(__file__).resolve().parents[3]
        / "fixtures"
        / "dynamo-1.7.0.dev20261026"
        / "metadata_upload_shapes.json"
    ).read_text()
)["cases"]
RELEASES = {"1.7.0.dev20261026": None, "1.6.1": "1.6.1"}
"""Recorded release -> the fake's --dynamo-release."""
WHERE = re.compile(r" at line \d+ column \d+$")


@pytest.fixture(scope="module")
def played() -> Iterator[dict[str, FakeDeployment]]:
    with (
        FakeDeployment("vllm", workers=1) as newest,
        FakeDeployment("vllm", workers=1, dynamo_release="1.6.1") as old,
    ):
        yield {"1.7.0.dev20261026": newest, "1.6.1": old}


def answer(client: httpx.Client, dep: FakeDeployment, request: dict[str, Any]) -> httpx.Response:
    return completions(client, dep, model="toy", **request)


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize("case", sorted(RECORDED))
def test_each_shape_is_answered_as_the_release_answered_it(
    client: httpx.Client, played: dict[str, FakeDeployment], release: str, case: str
) -> None:
    recorded = RECORDED[case][release]
    reply = answer(client, played[release], RECORDED[case]["request"])
    assert reply.status_code == recorded["status"], reply.text
    if release == "1.6.1" or recorded["status"] != 400:
        return
    assert reply.json()["message"] == WHERE.sub("", recorded["body"]["message"])


ARTIFACT = RECORDED["ga_stop"]["request"]


@shows("metadata_upload_refusals_reworded")
def test_metadata_upload_refusals_reworded(
    client: httpx.Client, played: dict[str, FakeDeployment]
) -> None:
    dep = played["1.7.0.dev20261026"]
    request = RECORDED["string"]["request"]
    assert "must be an object" in answer(client, dep, request).json()["message"]
    with faulted(dep, "metadata_upload_refusals_reworded"):
        reply = answer(client, dep, request)
    assert reply.status_code == 400 and "must be an object" not in reply.json()["message"]


@shows("generation_artifact_limits_unchecked")
def test_generation_artifact_limits_unchecked(
    client: httpx.Client, played: dict[str, FakeDeployment]
) -> None:
    dep = played["1.7.0.dev20261026"]
    assert answer(client, dep, ARTIFACT).status_code == 400
    with faulted(dep, "generation_artifact_limits_unchecked"):
        assert answer(client, dep, ARTIFACT).status_code == 500
