"""The fake refuses what the real frontend refuses, with its status and its words.

Replays the refusals recorded by `fixtures/dynamo-1.6.1/record_frontend.py --cases refusals`
(real Dynamo 1.6.1 in front of real vLLM 0.31.0: `vllm-cpu/refuse_*`) against a fake playing
1.6.1, and those the 1.7 dev frontend decides otherwise (`dynamo-1.7.0.dev20261026/mocker/`)
against a fake playing that build. Status, content type, body keys and message must agree; a
message is compared up to serde's " at line N column M", and an "Unsupported parameter(s)"
list as a set (the frontend names them in no fixed order).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_fake_recorded_shapes import _replay

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.deployment.pytest_fixtures import make_fake_deployment_fixture

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
VLLM_1_6 = FIXTURES / "dynamo-1.6.1" / "vllm-cpu"
MOCKER_1_7 = FIXTURES / "dynamo-1.7.0.dev20261026" / "mocker"
CASES = [
    *(f"1.6.1/{p.stem}" for p in sorted(VLLM_1_6.glob("refuse_*.json"))),
    "1.6.1/chat_top_logprobs_without_logprobs",
    *(f"1.7/{p.stem}" for p in sorted(MOCKER_1_7.glob("*.json"))),
]

played_1_6 = make_fake_deployment_fixture(
    "played_1_6", "vllm", scope="module", workers=1, model="tiny", dynamo_release="1.6.1"
)
played_1_7 = make_fake_deployment_fixture(
    "played_1_7", "vllm", scope="module", workers=1, dynamo_release="1.7.0.dev20261026"
)


def words(message: str) -> Any:
    said = message.split(" at line ")[0]
    listed = re.fullmatch(r"Validation: Unsupported parameter\(s\): (.*)", said)
    return sorted(re.findall(r"`([^`]+)`", listed.group(1))) if listed else said


@pytest.mark.parametrize("case", CASES)
def test_refused_as_the_real_frontend_refuses(
    case: str, client: httpx.Client, played_1_6: FakeDeployment, played_1_7: FakeDeployment
) -> None:
    release, _, name = case.partition("/")
    directory, fake = (VLLM_1_6, played_1_6) if release == "1.6.1" else (MOCKER_1_7, played_1_7)
    recorded = json.loads((directory / f"{name}.json").read_text())
    expected = recorded["response"]
    got = _replay(client, fake, recorded["request"])
    assert got.status_code == expected["status"], (case, got.text[:300])
    assert got.headers.get("content-type") == expected["headers"].get("content-type")
    if expected["status"] == 200:
        return  # the answer's shape: test_fake_recorded_shapes (1.6.1); a mocker's is its own
    body = got.json()
    assert set(body) == set(expected["body"]), case
    assert words(body["message"]) == words(expected["body"]["message"]), case


def test_the_recordings_say_what_the_fakes_were_fixed_for() -> None:
    """The two refusals a client certified on the old fakes met first on a real deployment."""
    missing = json.loads((VLLM_1_6 / "refuse_completions_missing_model.json").read_text())
    assert "model" not in missing["request"]["body"]
    assert missing["response"]["status"] == 400
    assert "missing field `model`" in missing["response"]["body"]["message"]
    beam = json.loads((VLLM_1_6 / "refuse_completions_use_beam_search.json").read_text())
    assert beam["request"]["body"]["use_beam_search"] is False
    assert words(beam["response"]["body"]["message"]) == ["use_beam_search"]
