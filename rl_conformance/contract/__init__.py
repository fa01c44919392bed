"""The contract, one declaration per area: each capability row of the matrix (id, title, level,
section, the spec's sentence, the support each backend documents, the faults made to break it)
is declared once, in `contract/<area>.py`. A row's own check takes its metadata from the row
(`checks.base.check(ROW)`), suites mark their tests with the row (`@capability(contract.tokens.
COMPLETION_IDS)`), and `model.capabilities` indexes the rows for the rest of the harness.
`contract.adapter` declares the adapter checklist the same way: the rows of the adapter matrix
(`rl-conformance certify-adapter`), apart from the deployment's.

This is the lowest layer of the harness besides `version`, `errors`, `admission` and
`redaction`: it imports nothing of the harness but itself."""

from __future__ import annotations

from . import (
    adapter,
    admin,
    cancel,
    discovery,
    errors,
    generate,
    logprobs,
    migration,
    namespace,
    refresh,
    retry,
    stream,
    telemetry,
    tokens,
)
from .kinds import Backend, Capability, Level, Support

AREAS = (
    discovery,
    tokens,
    logprobs,
    generate,
    stream,
    admin,
    refresh,
    namespace,
    cancel,
    retry,
    migration,
    telemetry,
    errors,
)
"""The areas in the order the matrix shows them."""

CAPABILITIES: tuple[Capability, ...] = tuple(row for area in AREAS for row in area.ROWS)
BY_ID: dict[str, Capability] = {row.id: row for row in CAPABILITIES}

__all__ = [
    "AREAS",
    "BY_ID",
    "CAPABILITIES",
    "Backend",
    "Capability",
    "Level",
    "Support",
    "adapter",
    "admin",
    "cancel",
    "discovery",
    "errors",
    "generate",
    "logprobs",
    "migration",
    "namespace",
    "refresh",
    "retry",
    "stream",
    "telemetry",
    "tokens",
]
