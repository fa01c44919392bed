"""What a capability of the registry is made of: the backends, the support the spec documents
for each, the sections its sentences come from, and the constructor both halves of the registry
(`capabilities`, `control_capabilities`) use."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ..checks.base import Level


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
    id: str
    title: str
    area: str
    level: Level
    section: str
    quote: str
    documented: dict[Backend, Support] = field(default_factory=dict)

    def support_for(self, backend: str) -> Support:
        return self.documented.get(Backend(backend), Support.SUPPORTED)


ALL = {backend: Support.SUPPORTED for backend in Backend}
RL_WORKERS = {
    Backend.VLLM: Support.SUPPORTED,
    Backend.SGLANG: Support.UNSUPPORTED,
    Backend.TRTLLM: Support.UNSUPPORTED,
}

DISCOVERY = "Discover Workers Safely"
TOKENS = "Preserve Token Authority"
RETURNS = "Know What Returns to the Trainer"
STREAM = "Handle Streaming and Retries"
COMPAT = "Backend Compatibility"
ADMIN_SECTION = "Compare vLLM and SGLang Administration"
REFRESH = "Coordinate Policy Refresh"
ADMIN = {
    Backend.VLLM: Support.SUPPORTED,
    Backend.SGLANG: Support.SUPPORTED,
    Backend.TRTLLM: Support.UNSUPPORTED,
}


def cap(
    id: str,
    title: str,
    section: str,
    quote: str,
    documented: dict[Backend, Support] = ALL,
    level: Level = Level.MUST,
) -> Capability:
    return Capability(
        id=id,
        title=title,
        area=id.split(".", 1)[0],
        level=level,
        section=section,
        quote=quote,
        documented=dict(documented),
    )
