"""Namespace-scoped RL discovery: the listener's own environment decides what it lists."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fake_backend_helpers import rl_workers

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.discovery.namespaces import NamespaceScope, resolve_scope

NAMESPACES = ["ns", "ns-abc123", "ns2", "dynamo", ""]


@pytest.mark.parametrize(
    ("env", "kind", "value"),
    [
        ({}, "exact", "dynamo"),
        ({"DYN_NAMESPACE": "ns"}, "exact", "ns"),
        ({"DYN_NAMESPACE": ""}, "exact", ""),  # empty is a namespace, not "unset"
        ({"DYN_NAMESPACE": "ns", "DYN_NAMESPACE_WORKER_SUFFIX": "abc123"}, "exact", "ns-abc123"),
        ({"DYN_NAMESPACE_WORKER_SUFFIX": "abc123"}, "exact", "dynamo-abc123"),
        ({"DYN_NAMESPACE": "ns", "DYN_NAMESPACE_WORKER_SUFFIX": ""}, "exact", "ns"),
        ({"DYN_NAMESPACE_PREFIX": "ns", "DYN_NAMESPACE_WORKER_SUFFIX": "x"}, "prefix", "ns"),
        ({"DYN_NAMESPACE_PREFIX": "dynamo"}, "global", "dynamo"),
        ({"DYN_NAMESPACE_PREFIX": "", "DYN_NAMESPACE": "ns"}, "exact", "ns"),
    ],
)
def test_scope_rules(env: dict[str, str], kind: str, value: str) -> None:
    assert resolve_scope(env) == NamespaceScope(kind, value)  # type: ignore[arg-type]


def test_prefix_matching_is_boundary_aware() -> None:
    scope = NamespaceScope("prefix", "ns")
    assert [scope.matches(ns) for ns in NAMESPACES] == [True, True, False, False, False]
    assert scope.matches("ns2", ignore_boundary=True)
    # The real 1.6.1 listener: a trailing hyphen is part of the prefix, not a wildcard.
    trailing = NamespaceScope("prefix", "ns-")
    assert trailing.matches("ns-") and trailing.matches("ns--x")
    assert not trailing.matches("ns-x") and not trailing.matches("ns")


def test_strict_prefix_keeps_only_operator_worker_generations() -> None:
    """As the real 1.6.1 listener does with DYN_NAMESPACE_PREFIX_STRICT (measured)."""
    env = {"DYN_NAMESPACE_PREFIX": "ns", "DYN_NAMESPACE_PREFIX_STRICT": "TRUE"}
    scope = resolve_scope(env)
    kept = ["ns", "ns-legacy", "ns-0123abcd"]
    dropped = ["ns-abc123", "ns-ABCDEF12", "ns-0123abcde", "ns-0123abcd-x", "ns-legacy-x"]
    assert all(scope.matches(ns) for ns in kept)
    assert not any(scope.matches(ns) for ns in dropped)
    for off in ("0", "false", "", "2"):
        loose = resolve_scope({**env, "DYN_NAMESPACE_PREFIX_STRICT": off})
        assert all(loose.matches(ns) for ns in kept + dropped)


@pytest.fixture(scope="module")
def fleet() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", workers=5, worker_namespaces=NAMESPACES, listener_env={}) as dep:
        yield dep


def listed(client: httpx.Client, dep: FakeDeployment) -> tuple[str, list[str]]:
    body = rl_workers(client, dep)
    return body["namespace"], [w["namespace"] for w in body["workers"]]


@pytest.mark.parametrize(
    ("env", "scope", "namespaces"),
    [
        ({}, "dynamo", ["dynamo"]),
        ({"DYN_NAMESPACE": "ns"}, "ns", ["ns"]),
        ({"DYN_NAMESPACE": ""}, "", [""]),
        (
            {"DYN_NAMESPACE": "ns", "DYN_NAMESPACE_WORKER_SUFFIX": "abc123"},
            "ns-abc123",
            ["ns-abc123"],
        ),
        ({"DYN_NAMESPACE_PREFIX": "ns"}, "ns", ["ns", "ns-abc123"]),
        ({"DYN_NAMESPACE_PREFIX": "dynamo"}, "dynamo", ["", "dynamo", "ns", "ns-abc123", "ns2"]),
        ({"DYN_NAMESPACE_PREFIX": ""}, "dynamo", ["dynamo"]),
    ],
)
def test_listener_scope(
    client: httpx.Client,
    fleet: FakeDeployment,
    env: dict[str, str],
    scope: str,
    namespaces: list[str],
) -> None:
    fleet.set_listener_env(env)
    assert listed(client, fleet) == (scope, namespaces)


def test_worker_identity_follows_namespace(client: httpx.Client, fleet: FakeDeployment) -> None:
    fleet.set_listener_env({"DYN_NAMESPACE_PREFIX": "ns"})
    workers = rl_workers(client, fleet)["workers"]
    for worker in workers:
        ns = worker["namespace"]
        assert worker["request_plane_url"] == f"dyn://{ns}.backend.rl"
        assert worker["transport"]["tcp"].endswith(f"/{ns}/backend/rl")
    assert [w["namespace"] for w in fleet.workers] == NAMESPACES
    health = client.get(f"{fleet.frontend_url}/health").json()
    assert "dyn://ns2.backend.generate" in health["endpoints"]
    # Model discovery is not scoped: every worker serves generation.
    assert len({i["instance_id"] for i in health["instances"]}) == 5


def test_listener_env_on_control_port(client: httpx.Client, fleet: FakeDeployment) -> None:
    url = f"{fleet.control_url}/listener_env"
    assert client.post(url, json={"env": {"DYN_NAMESPACE": "ns2"}}).json() == {
        "env": {"DYN_NAMESPACE": "ns2"}
    }
    assert client.get(url).json() == {"env": {"DYN_NAMESPACE": "ns2"}}
    assert listed(client, fleet) == ("ns2", ["ns2"])
    assert client.post(url, json={"env": [1]}).status_code == 400
    assert client.post(url, json={"nothing": 1}).status_code == 400
    fleet.set_listener_env({})


def test_listener_reads_process_environment(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DYN_NAMESPACE_PREFIX", "team")
    with FakeDeployment("vllm", worker_namespaces=["team-a1", "other"]) as dep:
        assert listed(client, dep) == ("team", ["team-a1"])
        monkeypatch.setenv("DYN_NAMESPACE_PREFIX", "other")  # read at every request
        assert listed(client, dep) == ("other", ["other"])
        assert client.post(
            f"{dep.control_url}/listener_env", json={"env": {"DYN_NAMESPACE": "team-a1"}}
        ).json() == {"env": {"DYN_NAMESPACE": "team-a1"}}
        assert listed(client, dep) == ("team-a1", ["team-a1"])
        assert client.post(f"{dep.control_url}/listener_env", json={"env": None}).json() == {
            "env": None
        }
        assert listed(client, dep) == ("other", ["other"])


def test_too_many_namespaces() -> None:
    with pytest.raises(ValueError, match="worker namespaces"):
        FakeDeployment("vllm", workers=1, worker_namespaces=["a", "b"])
