"""Reference oracle for the RL listener's namespace scope ("Scope Discovery by Namespace").

The listener reads its scope from its own environment; the first rule that applies wins:
DYN_NAMESPACE_PREFIX (non-empty: this namespace and its worker generations; `dynamo` means every
namespace), DYN_NAMESPACE_WORKER_SUFFIX (non-empty: exactly `{DYN_NAMESPACE}-{suffix}`),
DYN_NAMESPACE (exactly this namespace; `dynamo` only when unset, an empty value is the empty
namespace).

Two rules the spec does not write down come from the real 1.6.1 listener, measured by the
differential test in tests/dynamo (fixtures/KNOWN_DIFFERENCES.md):
- a prefix `p` matches `p` and `p-...` only, whatever `p` ends with: `ns-` matches `ns-` and
  `ns--x`, not `ns-abc` (an earlier reading of the source had a trailing hyphen match
  everything under it);
- with DYN_NAMESPACE_PREFIX_STRICT set to 1, true, yes or on (any case), a prefix scope keeps
  only the operator's worker generations: `p`, `p-legacy` and `p-` followed by exactly eight
  lowercase hex digits. The global `dynamo` prefix and the exact scopes ignore it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

GLOBAL_NAMESPACE = "dynamo"
STRICT_VALUES = frozenset({"1", "true", "yes", "on"})
_GENERATION = re.compile(r"(?:legacy|[0-9a-f]{8})")


class ScopeKind(StrEnum):
    EXACT = "exact"
    PREFIX = "prefix"
    GLOBAL = "global"


@dataclass(frozen=True)
class Scope:
    kind: ScopeKind
    value: str
    strict: bool = False

    def matches(self, namespace: str) -> bool:
        if self.kind is ScopeKind.GLOBAL:
            return True
        if self.kind is ScopeKind.EXACT or namespace == self.value:
            return namespace == self.value
        if not namespace.startswith(self.value + "-"):
            return False
        return (
            not self.strict or _GENERATION.fullmatch(namespace[len(self.value) + 1 :]) is not None
        )

    @property
    def label(self) -> str:
        """The `namespace` field of the discovery body for this scope."""
        return GLOBAL_NAMESPACE if self.kind is ScopeKind.GLOBAL else self.value


def resolve_scope(env: Mapping[str, str]) -> Scope:
    prefix = env.get("DYN_NAMESPACE_PREFIX", "")
    if prefix:
        if prefix == GLOBAL_NAMESPACE:
            return Scope(ScopeKind.GLOBAL, GLOBAL_NAMESPACE)
        strict = env.get("DYN_NAMESPACE_PREFIX_STRICT", "").lower() in STRICT_VALUES
        return Scope(ScopeKind.PREFIX, prefix, strict)
    base = env.get("DYN_NAMESPACE", GLOBAL_NAMESPACE)  # an empty value is a namespace too
    suffix = env.get("DYN_NAMESPACE_WORKER_SUFFIX", "")
    if suffix:
        return Scope(ScopeKind.EXACT, f"{base}-{suffix}")
    return Scope(ScopeKind.EXACT, base)
