"""The weight version a vLLM Python worker reports is the last one declared to it.

Upstream's integration reference, "Read and Declare the Weight Version"
(https://docs.nvidia.com/dynamo/dev/reinforcement-learning/rl-integration-reference): any JSON
value is a declaration, `null` included; an update that omits `weight_version` answers
`"version": "unknown"` with `"version_declared": false` and leaves the previous declaration in
place; an explicit `"unknown"` is a declaration like any other. In an update reply the flag
describes the update, in `get_weight_version` the stored declaration. Dynamo 1.6.1's vLLM worker
already answers this way (`fixtures/dynamo-1.6.1/vllm-cpu/flow_12_update_back_no_version.json`,
`flow_13_get_weight_version_after_unversioned_update.json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .. import contract
from .base import MISSING, Findings, Violation, check, describe, get_path


class Declared(NamedTuple):
    """One reply and what it must say: `version` and `version_declared`."""

    step: str
    """The call answered, and what came before it, in words."""
    reply: Any
    version: Any
    declared: bool


def _same(observed: Any, expected: Any) -> bool:
    """JSON equality: `1` is not `true`, `null` is not absent."""
    return type(observed) is type(expected) and observed == expected


@check(contract.admin.VERSION_DECLARATION)
def version_declaration(replies: Sequence[Declared]) -> Findings:
    for step, reply, version, declared in replies:
        for name, expected in (("version", version), ("version_declared", declared)):
            observed = get_path(reply, name)
            if observed is MISSING or not _same(observed, expected):
                yield Violation(
                    f"{step}: {name} {describe(observed)!r}, {expected!r} expected",
                    name,
                    expected,
                    describe(observed),
                )
