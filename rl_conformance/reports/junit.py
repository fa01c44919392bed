"""JUnit XML: one testsuite per target, one testcase per capability, for CI dashboards."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

from .markdown import target_release

FAILING = {"fail": "failure", "error": "error"}
SKIPPING = {"unsupported", "not-advertised", "skipped"}


def render_junit(matrix: dict[str, Any]) -> str:
    root = ElementTree.Element("testsuites", name=matrix["suite"]["name"])
    for target in matrix["targets"]:
        suite = ElementTree.SubElement(root, "testsuite", name=target["id"])
        _properties(suite, matrix, target)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        duration = 0.0
        for row in matrix["capabilities"]:
            cell = row["cells"][target["id"]]
            case = ElementTree.SubElement(
                suite,
                "testcase",
                classname=row["area"],
                name=row["id"],
                time=f"{cell['duration_s']:.3f}",
            )
            counts["tests"] += 1
            duration += cell["duration_s"]
            if cell["outcome"] in FAILING:
                tag = FAILING[cell["outcome"]]
                counts["failures" if tag == "failure" else "errors"] += 1
                element = ElementTree.SubElement(case, tag, message=cell["reason"][:500])
                element.text = _failure_text(row, cell)
            elif cell["outcome"] in SKIPPING:
                counts["skipped"] += 1
                ElementTree.SubElement(
                    case, "skipped", message=f"{cell['outcome']}: {cell['reason']}"[:500]
                )
        for key, value in counts.items():
            suite.set(key, str(value))
        suite.set("time", f"{duration:.3f}")
    if not matrix["complete"]:
        root.set("incomplete", "true")
    ElementTree.indent(root)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        + ElementTree.tostring(root, encoding="unicode")
        + "\n"
    )


def _properties(suite: ElementTree.Element, matrix: dict[str, Any], target: dict[str, Any]) -> None:
    """The target's versions (`version.<key>`: value [where it was read]), its Dynamo release
    with how it is known, and the run's `--record` facts (`recorded.<key>`) as the suite's
    properties."""
    sources = target.get("version_sources") or {}
    found = [
        (f"version.{key}", f"{value} [{sources[key]}]" if sources.get(key) else str(value))
        for key, value in (target.get("versions") or {}).items()
    ]
    found = [(f"warning.{n}", text) for n, text in enumerate(matrix.get("warnings", []), 1)] + found
    found.append(("dynamo_release", target_release(target)))
    found += [
        (f"recorded.{key}", f"{item['value']} [{item['source']}]")
        for key, item in (matrix.get("recorded") or {}).items()
    ]
    if not found:
        return
    properties = ElementTree.SubElement(suite, "properties")
    for name, value in found:
        ElementTree.SubElement(properties, "property", name=name, value=value)


def _failure_text(row: dict[str, Any], cell: dict[str, Any]) -> str:
    spec = row["spec"]
    lines = [f"requirement ({row['level']}, {spec['section']}): {spec['quote']}", cell["reason"]]
    for item in cell["evidence"]:
        lines.append(f"{item['check_id']}: {item['message']}")
        lines.append(
            f"  field {item.get('field') or '-'}: expected {item.get('expected')!r}, "
            f"observed {item.get('observed')!r}"
        )
        if item.get("reproducer"):
            lines.append(f"  reproduce: {item['reproducer']}")
        if item.get("wire_log"):
            lines.append(f"  wire log: {item['wire_log']}")
    return "\n".join(lines)
