"""SGLang's native `/generate` stream is judged like the OpenAI routes: its `output_ids` are the
engine's ids, `meta_info.output_token_logprobs` the selected logprobs, `meta_info.finish_reason`
the terminal state. Shown on a real client's recording (Slime through Dynamo's frontend,
fixtures/framework_clients/recorded/slime-dynamo-generation), each rule passing as recorded and
failing once the admitted sample or the reply breaks exactly it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.certify.replay import rejudge

RECORDING = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "framework_clients"
    / "recorded"
    / "slime-dynamo-generation"
    / "iteration.json"
)
JUDGED = (
    "adapter.verified_terminal_only",
    "adapter.engine_token_ids",
    "adapter.logprob_alignment",
    "adapter.generation_reaches_backend",
)


def _outcomes(document: dict[str, Any]) -> dict[str, str]:
    return {f.check_id: f.outcome for f in rejudge(document) if f.check_id in JUDGED}


@pytest.fixture
def recorded() -> dict[str, Any]:
    return json.loads(RECORDING.read_text())


def test_the_native_stream_is_judged_as_generation(recorded: dict[str, Any]) -> None:
    assert recorded["records"][0]["path"] == "/generate"
    assert _outcomes(recorded) == dict.fromkeys(JUDGED, "pass")


def _other_id(document: dict[str, Any]) -> None:
    """Slime sends no attempt identity, so a sample is traced by its ids: name the attempt
    first, so that a sample with another id is still traced to this reply."""
    document["records"][0]["headers"]["x-request-id"] = "s1-attempt"
    document["admissions"][0]["sample"]["attempt_id"] = "s1-attempt"
    document["admissions"][0]["sample"]["token_ids"][-1] += 1


def _other_logprob(document: dict[str, Any]) -> None:
    document["admissions"][0]["sample"]["logprobs"][2] += 1e-3


def _no_finish(document: dict[str, Any]) -> None:
    for event in document["records"][0]["events"]:
        if isinstance(event, dict):
            event["meta_info"]["finish_reason"] = None


def _text_prompt(document: dict[str, Any]) -> None:
    body = document["records"][0]["body"]
    body["text"] = "a prompt as text"
    del body["input_ids"]


@pytest.mark.parametrize(
    ("breaks", "check"),
    [
        (_other_id, "adapter.engine_token_ids"),
        (_other_logprob, "adapter.logprob_alignment"),
        (_no_finish, "adapter.verified_terminal_only"),
        (_text_prompt, "adapter.engine_token_ids"),
    ],
)
def test_each_rule_fails_on_the_native_stream(
    recorded: dict[str, Any], breaks: Callable[[dict[str, Any]], None], check: str
) -> None:
    broken = copy.deepcopy(recorded)
    breaks(broken)
    assert _outcomes(broken)[check] == "fail"
