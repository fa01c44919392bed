"""Reference oracle for the RL listener's namespace scope ("Scope Discovery by Namespace").

The listener reads three variables from its own environment; the first that applies wins:
DYN_NAMESPACE_PREFIX (non-empty: this namespace and its worker generations; `dynamo` means every
namespace), DYN_NAMESPACE_WORKER_SUFFIX (non-empty: exactly `{DYN_NAMESPACE}-{suffix}`),
DYN_NAMESPACE (exactly this namespace; `dynamo` only when unset, an empty value is the empty
namespace).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

GLOBAL_NAMESPACE = "dynamo"


class ScopeKind(StrEnum):
    EXACT = "exact"
    PREFIX = "prefix"
    GLOBAL = "global"


@dataclass(frozen=True)
class Scope:
    kind: ScopeKind
    value: str

    def matches(self, namespace: str) -> bool:
        if self.kind is ScopeKind.GLOBAL:
            return True
        if self.kind is ScopeKind.EXACT:
            return namespace == self.value
        if self.value.endswith("-"):
            return namespace.startswith(self.value)
        return namespace == self.value or namespace.startswith(self.value + "-")

    @property
    def label(self) -> str:
        """The `namespace` field of the discovery body for this scope."""
        return GLOBAL_NAMESPACE if self.kind is ScopeKind.GLOBAL else self.value


def resolve_scope(env: Mapping[str, str]) -> Scope:
    prefix = env.get("DYN_NAMESPACE_PREFIX", "")
    if prefix:
        if prefix == GLOBAL_NAMESPACE:
            return Scope(ScopeKind.GLOBAL, GLOBAL_NAMESPACE)
        return Scope(ScopeKind.PREFIX, prefix)
    base = env.get("DYN_NAMESPACE", GLOBAL_NAMESPACE)  # an empty value is a namespace too
    suffix = env.get("DYN_NAMESPACE_WORKER_SUFFIX", "")
    if suffix:
        return Scope(ScopeKind.EXACT, f"{base}-{suffix}")
    return Scope(ScopeKind.EXACT, base)
