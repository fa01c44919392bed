"""The kill matrix: which capabilities (and checks) each named fault of our fakes flips.

A run in fault-matrix mode has one clean fake per backend and one fake per fault. Comparing a
fault's column with the clean column of its backend gives the capabilities the fault "killed"
and the checks that failed (or flagged a release difference the clean column does not have).
A fault nothing kills, or a check that kills nothing, means the suite cannot fail where it
should.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..redaction import write_text

SEPARATOR = "~"


def fault_target_id(backend: str, fault: str) -> str:
    return f"{backend}{SEPARATOR}{fault}"


def split_target_id(target_id: str) -> tuple[str, str] | None:
    if SEPARATOR not in target_id:
        return None
    backend, fault = target_id.split(SEPARATOR, 1)
    return backend, fault


def build_kill_matrix(matrix: dict[str, Any], checks: Iterable[str]) -> dict[str, Any]:
    rows = matrix["capabilities"]
    clean = {target["id"] for target in matrix["targets"] if split_target_id(target["id"]) is None}
    clean_failures = sorted(
        f"{row['id']} on {target}"
        for row in rows
        for target in clean
        if row["cells"][target]["outcome"] in ("fail", "error")
    )
    faults = []
    killing_checks: dict[str, list[str]] = {}
    for target in matrix["targets"]:
        parsed = split_target_id(target["id"])
        if parsed is None:
            continue
        backend, fault = parsed
        baseline = f"fake-{backend}"
        flipped: list[str] = []
        failed_checks: set[str] = set()
        for row in rows:
            cell = row["cells"][target["id"]]
            before = row["cells"].get(baseline, {}).get("outcome")
            if cell["outcome"] != before and cell["outcome"] in ("fail", "error"):
                flipped.append(row["id"])
                failed_checks.update(
                    check["id"] for check in cell["checks"] if check["outcome"] == "fail"
                )
                failed_checks.update(item["check_id"] for item in cell["evidence"])
            elif flagged := _new_differences(cell, row["cells"].get(baseline, {})):
                flipped.append(row["id"])  # a release difference the clean fake does not show
                failed_checks.update(flagged)
        for check_id in failed_checks:
            killing_checks.setdefault(check_id, []).append(fault)
        faults.append(
            {
                "fault": fault,
                "backend": backend,
                "killed": bool(flipped),
                "flipped": sorted(flipped),
                "failed_checks": sorted(failed_checks),
            }
        )
    registered = sorted(checks)
    return {
        "complete": matrix["complete"],
        "faults": sorted(faults, key=lambda item: item["fault"]),
        "clean_failures": clean_failures,
        "checks": {check_id: sorted(killing_checks.get(check_id, [])) for check_id in registered},
        "unkilled_faults": sorted(item["fault"] for item in faults if not item["killed"]),
        "checks_killing_nothing": sorted(
            check_id for check_id in registered if not killing_checks.get(check_id)
        ),
    }


def _new_differences(cell: dict[str, Any], clean: dict[str, Any]) -> set[str]:
    """The checks of the release differences flagged on `cell` and not on the clean fake's: a
    check no normative sentence fixes is proven able to fire by a fault that flags it."""
    seen = {item["check_id"] for item in clean.get("release_differences", [])}
    return {item["check_id"] for item in cell.get("release_differences", [])} - seen


def render_kill_matrix(kill: dict[str, Any]) -> str:
    lines = [
        "# Kill matrix",
        "",
        f"{len(kill['faults'])} faults, {sum(f['killed'] for f in kill['faults'])} killed; "
        f"{len(kill['checks'])} checks, "
        f"{len(kill['checks']) - len(kill['checks_killing_nothing'])} kill at least one fault; "
        f"clean fakes failing: {len(kill['clean_failures'])}.",
        "",
        "| fault | backend | capabilities flipped | checks that failed |",
        "|---|---|---|---|",
    ]
    for item in kill["faults"]:
        flipped = ", ".join(f"`{c}`" for c in item["flipped"]) or "**NOT KILLED**"
        checks = ", ".join(f"`{c}`" for c in item["failed_checks"])
        lines.append(f"| `{item['fault']}` | {item['backend']} | {flipped} | {checks} |")
    lines += ["", "## Faults killed by each check", "", "| check | faults |", "|---|---|"]
    for check_id, faults in kill["checks"].items():
        lines.append(f"| `{check_id}` | {', '.join(faults) or '**none**'} |")
    if kill["clean_failures"]:
        lines += ["", "## Clean fakes failing (must be empty)", ""]
        lines += [f"- {item}" for item in kill["clean_failures"]]
    return "\n".join(lines) + "\n"


def write_kill_matrix(kill: dict[str, Any], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    write_text(directory / "kill-matrix.json", json.dumps(kill, indent=2) + "\n")
    write_text(directory / "kill-matrix.md", render_kill_matrix(kill))


def reviewed_flips(kill: dict[str, Any], reviewed: dict[str, Any]) -> dict[str, Any]:
    """The reviewed flips document (`fixtures/expected/kill-matrix-flips.json`) as this kill
    matrix observed it: under each fault, the capabilities it flipped but those its
    `may_also_flip` allows (a secondary flip a slow machine shows); the description and the
    allowances as they were reviewed. Written for its diff to be reviewed, never taken unread."""
    allowed = reviewed.get("may_also_flip") or {}
    flips = {
        item["fault"]: sorted(set(item["flipped"]) - set(allowed.get(item["fault"], [])))
        for item in kill["faults"]
    }
    return {**reviewed, "flips": dict(sorted(flips.items()))}


def write_reviewed_flips(kill: dict[str, Any], path: Path) -> None:
    """Rewrite the reviewed flips at `path` from `kill` (one-space indent, as it is kept)."""
    reviewed = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    write_text(path, json.dumps(reviewed_flips(kill, reviewed), indent=1) + "\n")


def merge_matrix_documents(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """One `matrix.json` from the shards of a parallel kill matrix: the targets of every shard
    (each clean fake once), each capability's cells from every shard, complete only if every
    shard completed."""
    if not documents:
        raise ValueError("no shard produced a matrix")
    merged = json.loads(json.dumps(documents[0]))
    seen = {target["id"] for target in merged["targets"]}
    rows = {row["id"]: row for row in merged["capabilities"]}
    for document in documents[1:]:
        for target in document["targets"]:
            if target["id"] not in seen:
                seen.add(target["id"])
                merged["targets"].append(target)
        for row in document["capabilities"]:
            rows[row["id"]]["cells"].update(row["cells"])
    incomplete = [
        d.get("incomplete_reason") or "interrupted" for d in documents if not d["complete"]
    ]
    merged["complete"] = not incomplete
    if incomplete:
        merged["incomplete_reason"] = "; ".join(incomplete)
    merged["started_at"] = min(d["started_at"] for d in documents)
    merged["finished_at"] = max(d["finished_at"] for d in documents)
    merged["duration_s"] = max(d["duration_s"] for d in documents)
    counts = dict.fromkeys(merged["summary"], 0)
    for row in merged["capabilities"]:
        for cell in row["cells"].values():
            counts[cell["outcome"]] = counts.get(cell["outcome"], 0) + 1
    merged["summary"] = counts
    failed = counts.get("fail", 0) + counts.get("error", 0)
    merged["exit_status"] = 0 if failed == 0 and merged["complete"] else 1
    return merged
