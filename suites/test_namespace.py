"""Namespace scope of RL discovery, compared with the reference oracle under chosen environments.

Needs a target whose RL listener can be re-scoped at run time (our fakes' control port)."""

from __future__ import annotations

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


def rescope(client: Client, target: Target, env: dict[str, str]) -> None:
    exchange = client.post(f"{target.control_url}/listener_env", {"env": env})
    if exchange.status != 200:
        raise FeatureAbsent(f"the listener cannot be re-scoped: {exchange.describe()}")


@capability("namespace.scope")
@property_test
@given(env=environments)
@example(env={"DYN_NAMESPACE_PREFIX": "", "DYN_NAMESPACE": "ns"})
@example(env={"DYN_NAMESPACE_PREFIX": "dyn"})
def test_listener_scope_follows_its_environment(
    client: Client, target: Target, verdict: Verdict, env: dict[str, str]
) -> None:
    if not target.rl_url or not target.control_url:
        pytest.skip("this target's RL listener cannot be restarted with a chosen environment")
    rescope(client, target, {"DYN_NAMESPACE_PREFIX": "dynamo"})
    try:
        everything = verdict.json(client.get(target.rl("/v1/rl/workers")))
        namespaces = [str(w.get("namespace")) for w in discovery.workers_of(everything)]
        if not namespaces:
            raise FeatureAbsent("GET /v1/rl/workers lists no RL workers in any namespace")
        rescope(client, target, env)
        exchange = client.get(target.rl("/v1/rl/workers"))
        verdict.check(control.namespace_scope(env, namespaces, verdict.json(exchange)), exchange)
    finally:
        rescope(client, target, {})
