"""Invalid requests are rejected before generation, with a status and a flat error body."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance.checks import errors
from rl_conformance.client.http import Client
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
PROMPT = [512, 733, 1024]

INVALID = {
    "completion_ids_with_n2": ({"n": 2, "nvext": {"extra_fields": ["completion_token_ids"]}}, 400),
    "unknown_nvext_key": ({"nvext": {"not_a_field": True}}, 400),
    "max_tokens_zero": ({"max_tokens": 0}, 400),
    "unknown_model": ({"model": "no-such-model-for-conformance"}, 404),
}


@capability("errors.validation")
@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_requests_are_rejected_with_flat_errors(
    rl_client: Client, rl_target: Target, rl_verdict: Verdict, case: str
) -> None:
    overrides, expected = INVALID[case]
    body: dict[str, Any] = {
        "model": rl_target.model,
        "prompt": PROMPT,
        "max_tokens": 2,
        **overrides,
    }
    exchange = rl_client.post(rl_target.url("/v1/completions"), body)
    try:
        parsed = exchange.json()
    except ValueError:
        parsed = exchange.body_preview()
    rl_verdict.check(errors.status_and_body(exchange.status, parsed, expected), exchange)
