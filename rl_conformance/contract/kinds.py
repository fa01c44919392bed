"""What a capability row is made of: its level, the backends and the support the spec documents
for each, the sections its sentences come from, and `row`, the one constructor every area's
declaration uses; and what an item of the adapter checklist is made of (`item`), a row of the
adapter matrix with the half of the protocol it is about."""

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


CHECKLIST = "Integration Checklist"


class Half(StrEnum):
    """The half of the adapter protocol a checklist item is about. The same words as
    `certify.protocol.GENERATION` / `REFRESH`, which an adapter declares in `implements` (the
    protocol imports nothing of the harness, so it spells them itself; a test holds them equal)."""

    GENERATION = "generation"
    REFRESH = "refresh"


@dataclass(frozen=True)
class ChecklistItem:
    """An item of the adapter checklist: its row of the adapter matrix (id, title, level,
    section, the spec's sentence), the half of the protocol it is about, and what would exercise
    it (named wherever it is skipped as never exercised). Its judge
    (`certify.findings.judges(ITEM)`) takes its id from here."""

    row: Capability
    half: Half
    exercised_by: str

    @property
    def id(self) -> str:
        return self.row.id

    def __hash__(self) -> int:
        return hash(self.row.id)


def item(
    id: str,
    title: str,
    section: str,
    quote: str,
    half: Half,
    exercised_by: str,
    level: Level = Level.MUST,
) -> ChecklistItem:
    return ChecklistItem(row(id, title, section, quote, ALL, level), half, exercised_by)
