"""What a capability row is made of: its level, the backends and the support the spec documents
for each, the sections its sentences come from, and `row`, the one constructor every area's
declaration uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Level(StrEnum):
    MUST = "MUST"
    SHOULD = "SHOULD"


class Backend(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"


class Support(StrEnum):
    SUPPORTED = "supported"
    EXPERIMENTAL = "experimental"
    TOPOLOGY_DEPENDENT = "topology-dependent"
    UNSUPPORTED = "unsupported"
    UNDOCUMENTED = "undocumented"


@dataclass(frozen=True)
class Capability:
    """A row of the matrix. Its own check (`checks.base.check(ROW)`) takes its id, level,
    section and quote from here, and states what it asserts as `asserts` (the title when empty)."""

    id: str
    title: str
    area: str
    level: Level
    section: str
    quote: str
    documented: dict[Backend, Support] = field(default_factory=dict)
    asserts: str = ""
    flipped_by: tuple[str, ...] = ()
    """The faults of the fakes made to break this row: each is reviewed to flip it in
    `fixtures/expected/kill-matrix-flips.json` (which may list further rows it also flips)."""

    def support_for(self, backend: str) -> Support:
        return self.documented.get(Backend(backend), Support.SUPPORTED)

    @property
    def statement(self) -> str:
        """What the row's own check asserts, as its results and `explain()` say it."""
        return self.asserts or self.title


ALL = {backend: Support.SUPPORTED for backend in Backend}
RL_WORKERS = {
    Backend.VLLM: Support.SUPPORTED,
    Backend.SGLANG: Support.UNSUPPORTED,
    Backend.TRTLLM: Support.UNSUPPORTED,
}
ADMIN = {
    Backend.VLLM: Support.SUPPORTED,
    Backend.SGLANG: Support.SUPPORTED,
    Backend.TRTLLM: Support.UNSUPPORTED,
}

DISCOVERY = "Discover Workers Safely"
TOKENS = "Preserve Token Authority"
RETURNS = "Know What Returns to the Trainer"
STREAM = "Handle Streaming and Retries"
COMPAT = "Backend Compatibility"
ADMIN_SECTION = "Compare vLLM and SGLang Administration"
REFRESH = "Coordinate Policy Refresh"


def row(
    id: str,
    title: str,
    section: str,
    quote: str,
    documented: dict[Backend, Support] = ALL,
    level: Level = Level.MUST,
    asserts: str = "",
    flipped_by: tuple[str, ...] = (),
) -> Capability:
    return Capability(
        id=id,
        title=title,
        area=id.split(".", 1)[0],
        level=level,
        section=section,
        quote=quote,
        documented=dict(documented),
        asserts=asserts,
        flipped_by=flipped_by,
    )
