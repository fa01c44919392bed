"""Which Dynamo namespaces the RL listener searches, decided from its own environment.

Why this is its own module: namespace scope is where RL discovery silently goes wrong (a
listener that finds none of a suffixed pool's workers, or every other deployment's pause
and update endpoints).  The rules follow the RL integration reference, "Scope Discovery
by Namespace", and facts §2.2/§2.4; the first rule that applies wins:

1. ``DYN_NAMESPACE_PREFIX`` non-empty: prefix scope, boundary-aware (``ns`` matches ``ns``
   and ``ns-abc123``, not ``ns2``; a prefix ending in ``-`` matches everything under it);
   the value ``dynamo`` means every namespace;
2. ``DYN_NAMESPACE_WORKER_SUFFIX`` non-empty: exactly ``{DYN_NAMESPACE or dynamo}-{suffix}``;
3. otherwise exactly ``DYN_NAMESPACE``, which falls back to ``dynamo`` only when unset (an
   empty value is the empty namespace).

The listener reports its scope as the top-level ``namespace``: the exact namespace, the
prefix, or ``dynamo`` for the global scope.  Two faults break the rules:
``namespace_prefix_matches_ns2`` (plain ``startswith``) and ``empty_prefix_global`` (an
empty prefix read as every namespace, as *model* discovery does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

GLOBAL_NAMESPACE = "dynamo"
DEFAULT_NAMESPACE = "dynamo"

PREFIX_VAR = "DYN_NAMESPACE_PREFIX"
SUFFIX_VAR = "DYN_NAMESPACE_WORKER_SUFFIX"
NAMESPACE_VAR = "DYN_NAMESPACE"

ScopeKind = Literal["exact", "prefix", "global"]


@dataclass(frozen=True)
class NamespaceScope:
    kind: ScopeKind
    value: str  # the exact namespace or the prefix; "dynamo" for global

    def matches(self, namespace: str, *, ignore_boundary: bool = False) -> bool:
        if self.kind == "global":
            return True
        if self.kind == "exact":
            return namespace == self.value
        if ignore_boundary or self.value.endswith("-"):
            return namespace.startswith(self.value)
        return namespace == self.value or namespace.startswith(self.value + "-")

    @property
    def reported(self) -> str:
        """The top-level ``namespace`` of ``/v1/rl/workers``."""
        return GLOBAL_NAMESPACE if self.kind == "global" else self.value


def resolve_scope(env: Mapping[str, str], *, empty_prefix_global: bool = False) -> NamespaceScope:
    """The RL listener's scope for this environment (see the module docstring)."""
    prefix = env.get(PREFIX_VAR)
    if prefix:
        if prefix == GLOBAL_NAMESPACE:
            return NamespaceScope("global", GLOBAL_NAMESPACE)
        return NamespaceScope("prefix", prefix)
    if prefix is not None and empty_prefix_global:
        return NamespaceScope("global", GLOBAL_NAMESPACE)
    base = env.get(NAMESPACE_VAR)
    if base is None:
        base = DEFAULT_NAMESPACE
    suffix = env.get(SUFFIX_VAR)
    if suffix:
        return NamespaceScope("exact", f"{base}-{suffix}")
    return NamespaceScope("exact", base)
