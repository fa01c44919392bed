"""Namespace scope of RL discovery, compared with the reference oracle under chosen environments.

Needs a target whose RL listener can be restarted under a chosen environment: a probe that only
deployments the suite launched offer (declared with `needs`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rl_conformance import FeatureAbsent, MissingInput, contract
from rl_conformance.checks import control, discovery
from rl_conformance.client.http import Client
from rl_conformance.errors import LaunchError
from rl_conformance.model.target import LISTENER_RESTART, Probe, Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = [pytest.mark.mutating, pytest.mark.needs(LISTENER_RESTART)]

VARIABLES = {
    "DYN_NAMESPACE_PREFIX": st.sampled_from(
        ["", "dynamo", "dyn", "ns", "dynamo-", "dynamo-abc123"]
    ),
    "DYN_NAMESPACE_WORKER_SUFFIX": st.sampled_from(["", "abc123"]),
    "DYN_NAMESPACE": st.sampled_from(["", "dynamo", "ns", "other"]),
    "DYN_NAMESPACE_PREFIX_STRICT": st.sampled_from(["", "1", "false"]),
}
environments = st.fixed_dictionaries({}, optional=VARIABLES)


@pytest.fixture
def namespaces(
    rl_probe: Probe, rl_client: Client, rl_target: Target, rl_verdict: Verdict
) -> Iterator[list[str]]:
    """Every worker namespace (read under the global scope), then the listener back to its own
    environment when the test ends."""
    if not rl_target.rl_url:
        raise MissingInput("no RL listener URL for this target (give --rl-url)")
    rl_probe.rescope_listener({"DYN_NAMESPACE_PREFIX": "dynamo"})
    try:
        everything = rl_verdict.json(rl_client.get(rl_target.rl("/v1/rl/workers")))
        found = [str(w.get("namespace")) for w in discovery.workers_of(everything)]
        if not found:
            raise FeatureAbsent("GET /v1/rl/workers lists no RL workers in any namespace")
        yield found
    finally:
        with contextlib.suppress(LaunchError):  # a deployment already stopped needs no restore
            rl_probe.rescope_listener({})


@capability(contract.namespace.SCOPE)
@given(env=environments)
@example(env={"DYN_NAMESPACE_PREFIX": "", "DYN_NAMESPACE": "ns"})
@example(env={"DYN_NAMESPACE_PREFIX": "dyn"})
@example(env={"DYN_NAMESPACE": ""})
def test_listener_scope_follows_its_environment(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_probe: Probe,
    namespaces: list[str],
    env: dict[str, str],
) -> None:
    rl_probe.rescope_listener(env)
    exchange = rl_client.get(rl_target.rl("/v1/rl/workers"))
    rl_verdict.check(control.namespace_scope(env, namespaces, rl_verdict.json(exchange)), exchange)
