"""A scenario's evidence as JSON, and judged again from it.

Every checklist item is a pure function of one scenario's evidence (the audit log, the steps,
the admissions, the fleet). Recorded once from a live run, the evidence can be judged again by
any later version of the checklist without the adapter, its framework or a fleet: a framework
client certified where its source was at hand stays certified in CI from its recording.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from ..errors import ConfigurationError
from .audit import AuditLog, AuditRecord, Step
from .checklist import judge
from .evidence import Admission, Evidence
from .findings import Finding
from .fleets import FLEETS, with_facts
from .protocol import Sample
from .scenarios import scenario as scenario_named

FORMAT = "rl-conformance.adapter-evidence.v1"


def evidence_to_json(evidence: Evidence, adapter: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "adapter": adapter,
        "scenario": evidence.scenario.name,
        "fleet": evidence.fleet.name,
        "model": evidence.fleet.model,
        **(
            {"engine_routes": list(evidence.fleet.engine_routes)}
            if evidence.fleet.engine_routes
            else {}
        ),
        "supplied": dict(evidence.supplied),
        "checkpoints": evidence.checkpoints,
        "implements": sorted(evidence.implements),
        "steps": [{**asdict(step), "detail": _detail(step.detail)} for step in evidence.steps],
        "admissions": [
            {"step": admission.step, "sample": asdict(admission.sample)}
            for admission in evidence.admissions
        ],
        "records": [asdict(record) for record in evidence.records],
    }


def _detail(detail: Any) -> str | None:
    """A step's detail as recorded: an exception's last line, not its traceback (which quotes
    the adapter's source)."""
    if detail is None:
        return None
    text = str(detail)
    if text.startswith("Traceback"):
        text = text.rstrip().splitlines()[-1]
    return text[:2000]


class RecordingError(ValueError):
    """A recording this version cannot judge, naming what is wrong."""


def evidence_from_json(document: dict[str, Any]) -> Evidence:
    if document.get("format") != FORMAT:
        raise RecordingError(f"format: expected {FORMAT!r}, observed {document.get('format')!r}")
    try:
        planned = scenario_named(document["scenario"])
    except KeyError as exc:
        raise RecordingError(f"scenario: no scenario named {document.get('scenario')!r}") from exc
    fleet = FLEETS.get(document.get("fleet", ""))
    if fleet is None:
        raise RecordingError(
            f"fleet: expected one of {sorted(FLEETS)}, observed {document.get('fleet')!r}"
        )
    try:
        routes = document.get("engine_routes")
        fleet = with_facts(fleet, routes, document.get("model"))
    except ConfigurationError as exc:
        raise RecordingError(f"the recorded deployment: {exc}") from exc
    log = AuditLog()
    known = {f.name for f in fields(AuditRecord)}
    for raw in document["records"]:
        log.adopt(AuditRecord(**{k: v for k, v in raw.items() if k in known}))
    steps = [Step(**raw) for raw in document["steps"]]
    log.steps = steps
    admissions = [Admission(raw["step"], _sample(raw["sample"])) for raw in document["admissions"]]
    return Evidence(
        planned,
        log,
        steps,
        admissions,
        fleet,
        dict(document.get("supplied") or {}),
        document.get("checkpoints", ""),
        frozenset(document.get("implements") or ()),
    )


def _sample(raw: dict[str, Any]) -> Sample:
    tuples = ("prompt_ids", "token_ids", "logprobs", "prompt_logprobs")
    return Sample(**{k: tuple(v) if k in tuples and v is not None else v for k, v in raw.items()})


def rejudge(document: dict[str, Any]) -> list[Finding]:
    """The findings the current checklist makes of a recorded scenario."""
    return judge(evidence_from_json(document))
