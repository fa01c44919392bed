"""The capability registry: the rows of the compatibility matrix, indexed for the harness.

The rows are declared once each, by area, in `rl_conformance.contract`: what a row certifies,
its level, the spec section and sentence, and the support the spec documents per backend (its
Backend Compatibility table). Documented support decides how an absent feature is reported:
absent where documented `supported` is a failure; absent where the spec documents anything
weaker is `unsupported`. A feature that works where the spec says it does not is reported as a
contradiction of the documentation.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ..contract import BY_ID, CAPABILITIES
from ..contract.kinds import ADMIN, ALL, RL_WORKERS, Backend, Capability, Level, Support

__all__ = [
    "ADMIN",
    "ALL",
    "BY_ID",
    "CAPABILITIES",
    "RL_WORKERS",
    "Backend",
    "Capability",
    "Level",
    "Support",
    "get",
    "unknown_ids_message",
]


def get(capability_id: str) -> Capability:
    try:
        return BY_ID[capability_id]
    except KeyError:
        raise KeyError(f"unknown capability {capability_id!r}") from None


def unknown_ids_message(ids: Iterable[str]) -> str | None:
    """What is wrong with `--capability` values that name no capability, with the nearest ids;
    None when every id is known."""
    unknown = sorted(set(ids) - set(BY_ID))
    if not unknown:
        return None
    hints = []
    for value in unknown:
        near = difflib.get_close_matches(value, BY_ID, n=3, cutoff=0.75)
        hints.append(f"{value!r}" + (f" (did you mean {', '.join(near)}?)" if near else ""))
    return (
        f"--capability: expected a capability id, observed {'; '.join(hints)}; "
        "`rl-conformance capabilities` lists them"
    )
