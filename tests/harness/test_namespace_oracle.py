"""The namespace-scope oracle follows the spec's precedence and boundary rules."""

from __future__ import annotations

import pytest

from rl_conformance.namespace_scope import Scope, ScopeKind, resolve_scope


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, Scope(ScopeKind.EXACT, "dynamo")),
        ({"DYN_NAMESPACE": ""}, Scope(ScopeKind.EXACT, "")),
        ({"DYN_NAMESPACE": "ns"}, Scope(ScopeKind.EXACT, "ns")),
        (
            {"DYN_NAMESPACE": "ns", "DYN_NAMESPACE_WORKER_SUFFIX": "abc"},
            Scope(ScopeKind.EXACT, "ns-abc"),
        ),
        ({"DYN_NAMESPACE_WORKER_SUFFIX": "abc"}, Scope(ScopeKind.EXACT, "dynamo-abc")),
        ({"DYN_NAMESPACE_WORKER_SUFFIX": "", "DYN_NAMESPACE": "ns"}, Scope(ScopeKind.EXACT, "ns")),
        (
            {"DYN_NAMESPACE_PREFIX": "ns", "DYN_NAMESPACE_WORKER_SUFFIX": "abc"},
            Scope(ScopeKind.PREFIX, "ns"),
        ),
        ({"DYN_NAMESPACE_PREFIX": "", "DYN_NAMESPACE": "ns"}, Scope(ScopeKind.EXACT, "ns")),
        ({"DYN_NAMESPACE_PREFIX": "dynamo"}, Scope(ScopeKind.GLOBAL, "dynamo")),
    ],
)
def test_precedence(env: dict[str, str], expected: Scope) -> None:
    assert resolve_scope(env) == expected


def test_prefix_is_boundary_aware() -> None:
    scope = resolve_scope({"DYN_NAMESPACE_PREFIX": "ns"})
    assert scope.matches("ns") and scope.matches("ns-abc123")
    assert not scope.matches("ns2") and not scope.matches("other-ns")


def test_global_scope_matches_everything_and_is_labelled_dynamo() -> None:
    scope = resolve_scope({"DYN_NAMESPACE_PREFIX": "dynamo"})
    assert scope.matches("anything") and scope.label == "dynamo"
