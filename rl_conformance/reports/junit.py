"""JUnit XML: one testsuite per target, one testcase per capability, for CI dashboards."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

FAILING = {"fail": "failure", "error": "error"}
SKIPPING = {"unsupported", "not-advertised", "skipped"}


def render_junit(matrix: dict[str, Any]) -> str:
    root = ElementTree.Element("testsuites", name=matrix["suite"]["name"])
    for target in matrix["targets"]:
        suite = ElementTree.SubElement(root, "testsuite", name=target["id"])
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
                element.text = "\n".join(
                    f"{item['check_id']}: {item['message']}\n  reproduce: {item.get('reproducer')}"
                    for item in cell["evidence"]
                )
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
