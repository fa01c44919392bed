"""The spec coverage (`docs/COVERAGE.md`): every normative sentence of the spec, quoted, with the
capabilities that judge it, or the reason none does.

The sentences are data (`fixtures/spec/requirements.json`): each has an `id`, its spec `section`,
the `sentence` as the spec writes it (a table row cell by cell, separated by ` | `), an optional
`source` (the public page it is quoted from, where the certified text lacks it), `judged_by`
(capability ids, and the adapter-certification items, `adapter.*`, that judge a trainer's side),
`partly` (what of the sentence those leave unjudged, or null), `not_covered` (why nothing
judges it, or null) and, optionally, `product_gaps`: the ids of Dynamo's RL product-gap register
(`docs/fern/scripts/rl_product_gaps.json` upstream, named with their titles in the document's
`product_gaps`) that leave the sentence open."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict

from ..model.capabilities import Capability

ADAPTER_PREFIX = "adapter."
"""The adapter-certification checklist's items (`rl_conformance/contract/adapter.py`)."""
REQUIREMENTS = Path("fixtures") / "spec" / "requirements.json"
COMMAND = "rl-conformance coverage --markdown > docs/COVERAGE.md"


class Sentence(TypedDict):
    id: str
    section: str
    sentence: str
    judged_by: list[str]
    partly: str | None
    not_covered: str | None
    product_gaps: list[str]


class Counts(TypedDict):
    sentences: int
    covered: int
    partly: int
    not_covered: int


def load_requirements(path: Path) -> dict[str, Any]:
    """The requirements document at `path` (a JSON object with `sentences`)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict) or not isinstance(document.get("sentences"), list):
        raise ValueError(f"{path}: expected a JSON object with a `sentences` list")
    return document


def sentences_of(document: dict[str, Any]) -> list[Sentence]:
    return [
        Sentence(
            id=row["id"],
            section=row["section"],
            sentence=row["sentence"],
            judged_by=list(row.get("judged_by") or []),
            partly=row.get("partly"),
            not_covered=row.get("not_covered"),
            product_gaps=list(row.get("product_gaps") or []),
        )
        for row in document["sentences"]
    ]


def status(sentence: Sentence) -> str:
    """`covered`, `partly` or `not_covered`."""
    if not sentence["judged_by"]:
        return "not_covered"
    return "partly" if sentence["partly"] else "covered"


def counts(sentences: Iterable[Sentence]) -> Counts:
    statuses = [status(sentence) for sentence in sentences]
    return Counts(
        sentences=len(statuses),
        covered=statuses.count("covered"),
        partly=statuses.count("partly"),
        not_covered=statuses.count("not_covered"),
    )


def anchor(capability: Capability) -> str:
    """The GitHub anchor of the capability's heading in docs/CAPABILITIES.md
    (`### \\`id\\` (LEVEL)`): lower case, punctuation but `-` and `_` dropped, spaces dashed."""
    heading = f"{capability.id} ({capability.level.value})".lower()
    return re.sub(r"[^a-z0-9 _-]", "", heading).replace(" ", "-")


def _cell(text: str) -> str:
    """Text in a table cell: a pipe not already escaped is escaped."""
    return re.sub(r"(?<!\\)\|", r"\\|", text)


def _judge(judge: str, anchors: dict[str, str]) -> str:
    if judge.startswith(ADAPTER_PREFIX):
        return f"`{judge}` (adapter)"
    return f"[`{judge}`](CAPABILITIES.md#{anchors[judge]})"


def _verdict(sentence: Sentence, anchors: dict[str, str], gaps: dict[str, Any]) -> str:
    if not sentence["judged_by"]:
        text = f"not covered: {sentence['not_covered']}"
    else:
        judges = ", ".join(_judge(judge, anchors) for judge in sentence["judged_by"])
        text = f"{judges}; partly: {sentence['partly']}" if sentence["partly"] else judges
    named = sentence.get("product_gaps") or []
    if named:
        text += "; product gap: " + ", ".join(f"{gap} ({gaps.get(gap, '?')})" for gap in named)
    return text


def _gap_lines(document: dict[str, Any], sentences: list[Sentence]) -> list[str]:
    """Dynamo's own register of RL product gaps, each with the spec sentences it leaves open."""
    register = document.get("product_gaps") or {}
    gaps: dict[str, str] = register.get("gaps") or {}
    if not gaps:
        return []
    lines = [
        "## Product gaps",
        "",
        f"Where a sentence is open because Dynamo lacks the surface, it names the product gap "
        f"upstream registers for it ({register.get('source', '')}). A gap no sentence names "
        "has no sentence of this spec.",
        "",
        "| Gap | Title | Sentences |",
        "| --- | --- | --- |",
    ]
    for gap, title in gaps.items():
        named = [s["id"] for s in sentences if gap in (s.get("product_gaps") or [])]
        lines.append(f"| {gap} | {title} | {', '.join(named) or 'none: no spec sentence'} |")
    return [*lines, ""]


def _failure_lines(document: dict[str, Any], anchors: dict[str, str]) -> list[str]:
    """Failures RL frameworks have reported against these servers, each with the row and check
    that judge it and the fault of the fakes (or the checklist's twin) that shows it failing."""
    failures: list[dict[str, str]] = document.get("reported_failures") or []
    if not failures:
        return []
    lines = [
        "## Failures RL frameworks report",
        "",
        "Failures reported in public issue trackers against these servers, each judged by a "
        "check of the row named (a trainer's side by the adapter checklist) and shown failing by "
        "the fault named, which flips exactly that row (`fixtures/expected/kill-matrix-flips.json`"
        ") or is the checklist's twin.",
        "",
        "| Reported in | Failure | Judged by | Check | Fault | How |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {_cell(item['report'])} | {_cell(item['failure'])} | "
        f"{_judge(item['row'], anchors)} | `{item['check']}` | `{item['fault']}` | "
        f"{_cell(item.get('note', ''))} |"
        for item in failures
    ]
    return [*lines, ""]


def _sources(document: dict[str, Any]) -> dict[str, str]:
    """Section -> the public page its sentences are quoted from, where not the certified text."""
    return {row["section"]: row["source"] for row in document["sentences"] if row.get("source")}


def render_coverage(document: dict[str, Any], capabilities: Iterable[Capability]) -> str:
    anchors = {capability.id: anchor(capability) for capability in capabilities}
    sentences = sentences_of(document)
    total = counts(sentences)
    spec = document.get("spec") or {}
    lines = [
        "# Spec coverage",
        "",
        f"Generated by `{COMMAND}` from `{REQUIREMENTS.as_posix()}`; do not edit by hand.",
        "",
        f"Every normative sentence of the {spec.get('title', 'spec')} ({spec.get('url', '')}), "
        "quoted from it: what a deployment, a backend or a trainer must, should or never do, and "
        "its imperative guidance. A table row is quoted cell by cell, separated by `|`. Each "
        "sentence names the capabilities that judge it (linked to "
        "[CAPABILITIES.md](CAPABILITIES.md)) and the adapter-certification items, `adapter.*`, "
        "that judge a trainer's side ([ADAPTERS.md](ADAPTERS.md)); `partly` says what those "
        "leave unjudged, and a sentence nothing judges says why.",
        "",
        "## Summary",
        "",
        "| Sentences | Covered | Partly covered | Not covered |",
        "| ---: | ---: | ---: | ---: |",
        f"| {total['sentences']} | {total['covered']} | {total['partly']} | "
        f"{total['not_covered']} |",
        "",
    ]
    unnamed = document.get("unnamed_capabilities") or {}
    if unnamed:
        lines += ["Capabilities no sentence names:", ""]
        lines += [f"- {_judge(key, anchors)}: {reason}" for key, reason in sorted(unnamed.items())]
        lines.append("")
    lines += _gap_lines(document, sentences)
    lines += _failure_lines(document, anchors)
    gaps = (document.get("product_gaps") or {}).get("gaps") or {}
    sources = _sources(document)
    sections: dict[str, list[Sentence]] = {}
    for sentence in sentences:
        sections.setdefault(sentence["section"], []).append(sentence)
    for section, rows in sections.items():
        lines += [f"## {section}", ""]
        if section in sources:
            lines += [
                f"Quoted from the current upstream page ({sources[section]}); the text this "
                "suite certifies lacks this section.",
                "",
            ]
        lines += ["| ID | Sentence (quoted) | Judged by |", "| --- | --- | --- |"]
        lines += [
            f"| {row['id']} | “{_cell(row['sentence'])}” | {_cell(_verdict(row, anchors, gaps))} |"
            for row in rows
        ]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
