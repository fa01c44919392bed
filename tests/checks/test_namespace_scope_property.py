"""The fake RL listener's namespace scope agrees with the reference oracle under generated
environments, over workers registered in deliberately awkward namespaces."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_backends import FakeDeployment
from rl_conformance.checks import control

NAMESPACES = [
    "dynamo",
    "dynamo-abc123",
    "dynamo2",
    "ns",
    "ns-abc123",
    "ns-",
    "ns2",
    "",
    "-abc123",
    "other",
]
VALUES = st.sampled_from(["", "dynamo", "dyn", "ns", "ns-", "ns-abc123", "ns2", "other", "abc123"])
ENVIRONMENTS = st.fixed_dictionaries(
    {},
    optional={
        "DYN_NAMESPACE_PREFIX": VALUES,
        "DYN_NAMESPACE_WORKER_SUFFIX": VALUES,
        "DYN_NAMESPACE": VALUES,
    },
)


@pytest.fixture(scope="module")
def listener() -> Iterator[tuple[FakeDeployment, httpx.Client]]:
    with (
        FakeDeployment("vllm", workers=len(NAMESPACES), worker_namespaces=NAMESPACES) as fleet,
        httpx.Client(timeout=5) as http,
    ):
        yield fleet, http


@settings(max_examples=200, deadline=None)
@given(env=ENVIRONMENTS)
def test_listener_scope_matches_the_oracle(
    listener: tuple[FakeDeployment, httpx.Client], env: dict[str, str]
) -> None:
    fleet, http = listener
    fleet.set_listener_env(env)
    body = http.get(f"{fleet.rl_url}/v1/rl/workers").json()
    result = control.namespace_scope(env, NAMESPACES, body)
    assert result.passed, result.explain()
