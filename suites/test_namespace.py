"""Namespace scope of RL discovery, compared with the reference oracle under chosen environments.

Needs a target whose RL listener can be re-scoped at run time (our fakes' control port)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rl_conformance import FeatureAbsent
from rl_conformance.checks import control, discovery
from rl_conformance.client import Client
from rl_conformance.suite_support import property_test
from rl_conformance.target import Target
from rl_conformance.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating

VARIABLES = {
    "DYN_NAMESPACE_PREFIX": st.sampled_from(["", "dynamo", "dyn", "ns", "dynamo-abc123"]),
    "DYN_NAMESPACE_WORKER_SUFFIX": st.sampled_from(["", "abc123"]),
    "DYN_NAMESPACE": st.sampled_from(["", "dynamo", "ns", "other"]),
}
environments = st.fixed_dictionaries({}, optional=VARIABLES)


@pytest.fixture
def scoped(
    rescope_listener: Any, client: Client, target: Target, verdict: Verdict
) -> Iterator[tuple[Any, list[str]]]:
    """Every worker namespace (read under the global scope), then the listener back to its own
    environment when the test ends."""
    if not target.rl_url or rescope_listener is None:
        pytest.skip("this target's RL listener cannot be restarted with a chosen environment")
    rescope_listener({"DYN_NAMESPACE_PREFIX": "dynamo"})
    try:
        everything = verdict.json(client.get(target.rl("/v1/rl/workers")))
        namespaces = [str(w.get("namespace")) for w in discovery.workers_of(everything)]
        if not namespaces:
            raise FeatureAbsent("GET /v1/rl/workers lists no RL workers in any namespace")
        yield rescope_listener, namespaces
    finally:
        rescope_listener({})


@capability("namespace.scope")
@property_test
@given(env=environments)
@example(env={"DYN_NAMESPACE_PREFIX": "", "DYN_NAMESPACE": "ns"})
@example(env={"DYN_NAMESPACE_PREFIX": "dyn"})
@example(env={"DYN_NAMESPACE": ""})
def test_listener_scope_follows_its_environment(
    client: Client,
    target: Target,
    verdict: Verdict,
    scoped: tuple[Any, list[str]],
    env: dict[str, str],
) -> None:
    rescope, namespaces = scoped
    rescope(env)
    exchange = client.get(target.rl("/v1/rl/workers"))
    verdict.check(control.namespace_scope(env, namespaces, verdict.json(exchange)), exchange)
