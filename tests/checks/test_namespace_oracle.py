"""The namespace-scope oracle follows the spec's precedence and boundary rules."""

from __future__ import annotations

import pytest

from rl_conformance.checks.namespace_scope import Scope, ScopeKind, resolve_scope


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


def test_a_trailing_hyphen_is_part_of_the_prefix() -> None:
    """Measured on the real 1.6.1 listener (tests/dynamo/test_namespace_differential.py)."""
    scope = resolve_scope({"DYN_NAMESPACE_PREFIX": "ns-"})
    assert scope.matches("ns-") and scope.matches("ns--x")
    assert not scope.matches("ns-abc") and not scope.matches("ns")


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "On"])
def test_strict_prefix_keeps_only_operator_worker_generations(value: str) -> None:
    scope = resolve_scope({"DYN_NAMESPACE_PREFIX": "ns", "DYN_NAMESPACE_PREFIX_STRICT": value})
    assert [scope.matches(ns) for ns in ("ns", "ns-legacy", "ns-0123abcd")] == [True] * 3
    dropped = ("ns-abc123", "ns-ABCDEF12", "ns-0123abcde", "ns-legacy-x", "ns2")
    assert not any(scope.matches(ns) for ns in dropped)


@pytest.mark.parametrize("value", ["0", "false", "", "2"])
def test_other_strict_values_leave_the_prefix_loose(value: str) -> None:
    scope = resolve_scope({"DYN_NAMESPACE_PREFIX": "ns", "DYN_NAMESPACE_PREFIX_STRICT": value})
    assert scope.matches("ns-abc123") and not scope.matches("ns2")


def test_strict_does_not_narrow_the_global_or_exact_scopes() -> None:
    strict = {"DYN_NAMESPACE_PREFIX_STRICT": "1"}
    assert resolve_scope({**strict, "DYN_NAMESPACE_PREFIX": "dynamo"}).matches("ns-abc123")
    assert resolve_scope({**strict, "DYN_NAMESPACE": "ns-abc123"}).matches("ns-abc123")
