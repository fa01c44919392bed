"""A cell's evidence: the check that found something, expected against observed, and how to
see it again (the reproducer and its wire log)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..wire.exchange import to_jsonable


@dataclass(frozen=True)
class Evidence:
    check_id: str
    message: str
    field: str = ""
    expected: Any = None
    observed: Any = None
    reproducer: str | None = None
    wire: dict[str, Any] | None = None
    """The failing exchange's wire log (`Exchange.wire_log`); the report writers save it as a
    file next to the matrix and name it in `wire_log`."""
    reproduced: bool | None = None
    reproduction: str | None = None
    """Set when the run verified the reproducer (`--verify-reproducers`, `reproducers`)."""

    def to_json(self) -> dict[str, Any]:
        document = {
            "check_id": self.check_id,
            "message": self.message,
            "field": self.field,
            "expected": to_jsonable(self.expected),
            "observed": to_jsonable(self.observed),
            "reproducer": self.reproducer,
        }
        if self.wire is not None:
            document["wire"] = self.wire
        if self.reproduction is not None:
            document["reproduced"] = self.reproduced
            document["reproduction"] = self.reproduction
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Evidence:
        return cls(
            document["check_id"],
            document["message"],
            document.get("field", ""),
            document.get("expected"),
            document.get("observed"),
            document.get("reproducer"),
            document.get("wire"),
            document.get("reproduced"),
            document.get("reproduction"),
        )
