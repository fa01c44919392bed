"""Which Dynamo namespaces the RL listener searches, decided from its own environment.

Why this is its own module: namespace scope is where RL discovery silently goes wrong (a
listener that finds none of a suffixed pool's workers, or every other deployment's pause
and update endpoints).  The rules follow the RL integration reference, "Scope Discovery
by Namespace", and CONTRACT-NOTES §U2.2/§U2.4; the first rule that applies wins:

1. ``DYN_NAMESPACE_PREFIX`` non-empty: prefix scope, boundary-aware (``ns`` matches ``ns``
   and ``ns-abc123``, not ``ns2``; ``ns-`` matches ``ns-`` and ``ns--x`` but not ``ns-abc``,
   as the real 1.6.1 listener does); the value ``dynamo`` means every namespace.  With
   ``DYN_NAMESPACE_PREFIX_STRICT`` truthy (1/true/yes/on) only the operator's worker
   generations stay: ``{prefix}``, ``{prefix}-legacy``, ``{prefix}-<8 lowercase hex>``;
2. ``DYN_NAMESPACE_WORKER_SUFFIX`` non-empty: exactly ``{DYN_NAMESPACE or dynamo}-{suffix}``;
3. otherwise exactly ``DYN_NAMESPACE``, which falls back to ``dynamo`` only when unset (an
   empty value is the empty namespace).

The listener reports its scope as the top-level ``namespace``: the exact namespace, the
prefix, or ``dynamo`` for the global scope.  Two faults break the rules:
``namespace_prefix_matches_ns2`` (plain ``startswith``) and ``empty_prefix_global`` (an
empty prefix read as every namespace, as *model* discovery does).
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

GLOBAL_NAMESPACE = "dynamo"
DEFAULT_NAMESPACE = "dynamo"

PREFIX_VAR = "DYN_NAMESPACE_PREFIX"
SUFFIX_VAR = "DYN_NAMESPACE_WORKER_SUFFIX"
NAMESPACE_VAR = "DYN_NAMESPACE"
STRICT_VAR = "DYN_NAMESPACE_PREFIX_STRICT"
TRUTHY = ("1", "true", "yes", "on")

ScopeKind = Literal["exact", "prefix", "global"]


@dataclass(frozen=True)
class NamespaceScope:
    kind: ScopeKind
    value: str  # the exact namespace or the prefix; "dynamo" for global
    strict: bool = False  # prefix scope narrowed to operator worker generations

    def matches(self, namespace: str, *, ignore_boundary: bool = False) -> bool:
        if self.kind == "global":
            return True
        if self.kind == "exact":
            return namespace == self.value
        if ignore_boundary:
            return namespace.startswith(self.value)
        if namespace == self.value:
            return True
        head, sep, generation = namespace.partition(self.value + "-")
        if head or not sep:
            return False
        return not self.strict or _is_generation(generation)

    @property
    def reported(self) -> str:
        """The top-level ``namespace`` of ``/v1/rl/workers``."""
        return GLOBAL_NAMESPACE if self.kind == "global" else self.value


def _is_generation(tail: str) -> bool:
    """An operator worker generation: ``legacy`` or eight lowercase hex digits."""
    hex_digits = set(string.digits + "abcdef")
    return tail == "legacy" or (len(tail) == 8 and set(tail) <= hex_digits)


def resolve_scope(env: Mapping[str, str], *, empty_prefix_global: bool = False) -> NamespaceScope:
    """The RL listener's scope for this environment (see the module docstring)."""
    prefix = env.get(PREFIX_VAR)
    if prefix:
        if prefix == GLOBAL_NAMESPACE:
            return NamespaceScope("global", GLOBAL_NAMESPACE)
        strict = env.get(STRICT_VAR, "").strip().lower() in TRUTHY
        return NamespaceScope("prefix", prefix, strict)
    if prefix is not None and empty_prefix_global:
        return NamespaceScope("global", GLOBAL_NAMESPACE)
    base = env.get(NAMESPACE_VAR)
    if base is None:
        base = DEFAULT_NAMESPACE
    suffix = env.get(SUFFIX_VAR)
    if suffix:
        return NamespaceScope("exact", f"{base}-{suffix}")
    return NamespaceScope("exact", base)
