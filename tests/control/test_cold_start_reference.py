"""The served-policy reference of a launched fake is a cold start on the checkpoint (the same fake
started fresh on it, through the launcher's probe, never by URL): a faithful update serves it, an
update that serves a mix of old and new weights does not, and without the channel (nor the files
and a reference Python) the reference is a missing input naming the flags and the channel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rl_conformance.checks.served_policy import served_policy
from rl_conformance.control.families import SGLANG, VLLM, NewWeights
from rl_conformance.control.policy_reference import (
    ReferenceSource,
    cold_start_body,
    from_cold_start,
)
from rl_conformance.control.weights import synthetic_path
from rl_conformance.errors import LaunchError
from rl_conformance.launchers.fake import FakeLauncher
from rl_conformance.model.target import (
    COLD_START,
    ENGINE_RECOVERY,
    LISTENER_RESTART,
    PROBE_REPLY,
    WORKER_DEPARTURE,
    WORKER_KILL,
    Target,
)
from rl_conformance.model.verdict import MissingInput

ALWAYS = {LISTENER_RESTART, WORKER_DEPARTURE, PROBE_REPLY, ENGINE_RECOVERY, WORKER_KILL}
PROMPT = [640, 1024, 777, 1800, 512, 333, 901, 445, 1203, 377, 1500, 1234]
TOKENS = 16
FAMILIES = {"vllm": VLLM, "sglang": SGLANG}
NO_PYTHON = Path("/nonexistent/python")
COLD_STARTED = "deployment the suite launches (--fake vllm, --fake sglang)"
"""How a missing reference names the channel: in plain words, where it is offered."""


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10, trust_env=False) as client:
        yield client


def launch(flavour: str, *faults: str) -> tuple[FakeLauncher, Target]:
    launcher = FakeLauncher(flavour, workers=1, faults=faults)
    return launcher, launcher.start()


def system_url(http: httpx.Client, target: Target) -> str:
    """The one worker's system URL: given to the suite (SGLang), or listed by discovery."""
    if target.worker_urls:
        return target.worker_urls[0]
    (worker,) = http.get(target.rl("/v1/rl/workers")).json()["workers"]
    return str(worker["system_url"])


def update(http: httpx.Client, target: Target, path: str) -> None:
    """Pause, load the checkpoint `path` from disk, resume: each answered success."""
    family = FAMILIES[target.backend]
    base = system_url(http, target)
    (call,) = family.update_calls(NewWeights("v-next", model_path=path))
    for route, body in ((family.pause, {}), (call.route, call.body), (family.resume, {})):
        reply = http.post(f"{base}/engine/{route}", json=dict(body))
        assert reply.status_code == 200, reply.text


def served(http: httpx.Client, target: Target) -> tuple[list[int], list[float], list[float | None]]:
    """The served-policy probe as the suite sends it (logprobs 0, prompt logprobs 0)."""
    body = {
        **cold_start_body(PROMPT, TOKENS),
        "model": target.model,
        "logprobs": 0,
    }
    answer = http.post(target.url("/v1/completions"), json=body).json()
    prompt = [
        None if entry is None else entry[str(token)]["logprob"]
        for entry, token in zip(answer["nvext"]["prompt_logprobs"], PROMPT, strict=True)
    ]
    selected = answer["choices"][0]["logprobs"]["token_logprobs"]
    return answer["nvext"]["completion_token_ids"], selected, prompt


def references(target: Target) -> ReferenceSource:
    return ReferenceSource.build(str(NO_PYTHON), (), (), probe=target.probe)


@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_a_faithful_update_serves_the_cold_start_reference(
    http: httpx.Client, flavour: str
) -> None:
    launcher, target = launch(flavour)
    try:
        assert COLD_START in target.offers
        path = synthetic_path("conformance-cold")
        source = references(target)
        reference = source.reference(path, PROMPT, TOKENS)
        assert reference.checkpoint == f"{path} (cold start)"
        assert len(reference.completion_ids) == TOKENS and reference.prompt_logprobs[0] is None
        assert all(margin >= 0 for margin in reference.margins)
        before = served(http, target)
        assert not served_policy(*before, reference).passed  # not yet that checkpoint
        update(http, target, path)
        assert served_policy(*served(http, target), reference).passed
        assert source.reference(path, PROMPT, TOKENS) is reference  # computed once
    finally:
        launcher.stop()


@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_an_update_serving_a_mix_is_not_the_checkpoint(http: httpx.Client, flavour: str) -> None:
    launcher, target = launch(flavour, "update_serves_a_mix")
    try:
        path = synthetic_path("conformance-mix")
        reference = references(target).reference(path, PROMPT, TOKENS)  # a clean cold start
        before = served(http, target)
        update(http, target, path)
        after = served(http, target)
        assert after[0] != before[0]  # the output changed: post_update_generation passes
        result = served_policy(*after, reference)
        assert not result.passed
        assert "cold start" in result.violations[0].message
    finally:
        launcher.stop()


@pytest.mark.parametrize(
    ("flavour", "offers"),
    [
        ("vllm", ALWAYS | {COLD_START}),
        ("sglang", ALWAYS | {COLD_START}),
        ("trtllm", ALWAYS),  # no weight updates
        ("vllm-sidecar", ALWAYS),  # updates are transfers, from no checkpoint
    ],
)
def test_only_fakes_updated_from_disk_offer_a_cold_start(flavour: str, offers: set[str]) -> None:
    launcher, target = launch(flavour)
    try:
        assert target.offers == offers
    finally:
        launcher.stop()


def test_without_files_python_or_channel_the_flags_and_the_channel_are_named() -> None:
    by_url = Target(id="u", backend="vllm", kind="external", frontend_url="http://x")
    with pytest.raises(MissingInput) as missing:
        references(by_url).reference("/checkpoints/a", PROMPT, TOKENS)
    assert "--reference-checkpoint" in str(missing.value)
    assert COLD_STARTED in str(missing.value) and COLD_START not in str(missing.value)


def test_a_readable_checkpoint_without_python_names_the_flag(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(MissingInput) as missing:
        ReferenceSource.build(str(NO_PYTHON), (), ()).reference(str(tmp_path), PROMPT, TOKENS)
    assert "--reference-python" in str(missing.value) and COLD_STARTED in str(missing.value)


def answer(**nvext: Any) -> dict[str, Any]:
    logprobs = {
        "token_logprobs": [-0.5, -1.0],
        "top_logprobs": [{"a": -0.5, "b": -1.5}, {"c": -1.0}],
    }
    return {
        "choices": [{"logprobs": logprobs}],
        "nvext": {
            "completion_token_ids": [7, 8],
            "prompt_logprobs": [None, {"4": {"logprob": -2.0, "rank": 3}}],
            **nvext,
        },
    }


def test_a_cold_start_answer_gives_ids_logprobs_margins_and_prompt_logprobs() -> None:
    reference = from_cold_start("/c", [3, 4], 2, answer())
    assert reference.completion_ids == (7, 8)
    assert reference.completion_logprobs == (-0.5, -1.0)
    # One alternative listed (two tokens sharing a text): a near-tie, judged no further.
    assert reference.margins == (1.0, 0.0)
    assert reference.prompt_logprobs == (None, -2.0)


def test_a_cold_start_answer_without_prompt_logprobs_is_no_reference() -> None:
    with pytest.raises(LaunchError, match="no usable reference"):
        from_cold_start("/c", [3, 4], 2, answer(prompt_logprobs=None))
