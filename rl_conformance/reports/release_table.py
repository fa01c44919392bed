"""A release matrix as Markdown, for `fixtures/DYNAMO_RELEASES.md`: each column's versions and
counts (or why it was not reached), then every capability whose outcome, or release
difference, differs between columns, with each differing cell's reason. Written by
`rl-conformance releases`, from a run, between two markers, so the document says what a run
measured and nothing typed by hand. Each launch kind has its own block (`dynamo-vllm` the
unnamed markers, `dynamo-sglang` markers naming it), so one document holds a release matrix per
engine, each replaced by its own run."""

from __future__ import annotations

from typing import Any

from ..wire.exchange import shorten

BEGIN = "<!-- rl-conformance releases: begin -->"
END = "<!-- rl-conformance releases: end -->"
UNNAMED_KIND = "dynamo-vllm"
"""The launch kind whose block has the unnamed markers (the first release matrix written)."""
COUNTED = ("pass", "fail", "error", "unsupported", "not-advertised", "skipped")


def render_release_table(matrix: dict[str, Any]) -> list[str]:
    targets = matrix["targets"]
    begin, end = markers(matrix)
    lines = [
        begin,
        f"Measured by `{' '.join(matrix.get('environment', {}).get('command', [])) or 'a run'}` "
        f"on {str(matrix.get('started_at', ''))[:10]}"
        + ("" if matrix.get("complete", True) else " (incomplete run)")
        + ":",
        "",
        "| column | versions | cells |",
        "|---|---|---|",
    ]
    for target in targets:
        versions = ", ".join(f"{k} {v}" for k, v in sorted((target.get("versions") or {}).items()))
        lines.append(
            f"| `{target['id']}` | {versions or 'none recorded'} | {_cells(matrix, target)} |"
        )
    differing = [
        row
        for row in matrix["capabilities"]
        if len({_seen(row["cells"][t["id"]]) for t in targets if not t.get("unreached")}) > 1
    ]
    lines.append("")
    if differing:
        reached = [t for t in targets if not t.get("unreached")]
        lines.append(
            "Capabilities whose outcome, or release difference (`~release`: a behaviour no "
            "spec sentence fixes, flagged and not failed), differs between the reached columns:"
        )
        lines.append("")
        lines.append("| capability | " + " | ".join(f"`{t['id']}`" for t in reached) + " |")
        lines.append("|---|" + "---|" * len(reached))
        for row in differing:
            cells = []
            for target in reached:
                cell = row["cells"][target["id"]]
                reason = "" if cell["outcome"] == "pass" else f": {_why(cell)}"
                reason += _flag(cell)
                cells.append(f"{cell['outcome']}{reason}".replace("|", "\\|"))
            lines.append(f"| `{row['id']}` | " + " | ".join(cells) + " |")
    else:
        lines.append("Every capability has the same outcome in every reached column.")
    lines.append(end)
    return lines


def markers(matrix: dict[str, Any]) -> tuple[str, str]:
    """The block's markers: the unnamed ones for a matrix of `dynamo-vllm` columns, else ones
    naming its columns' launch kinds (`dynamo-sglang@0.5.21...` is of kind `dynamo-sglang`)."""
    kinds = sorted({str(target["id"]).split("@", 1)[0] for target in matrix["targets"]})
    if kinds in ([], [UNNAMED_KIND]):
        return BEGIN, END
    named = " ".join(kinds)
    return f"<!-- rl-conformance releases {named}: begin -->", (
        f"<!-- rl-conformance releases {named}: end -->"
    )


def _seen(cell: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """What a column shows of a cell: its outcome and the checks of its release differences."""
    flagged = sorted({item["check_id"] for item in cell.get("release_differences") or ()})
    return cell["outcome"], tuple(flagged)


def _flag(cell: dict[str, Any]) -> str:
    """A cell's release differences: each check, expected against observed, and the cases."""
    found = cell.get("release_differences") or []
    if not found:
        return ""
    shown = "; ".join(
        f"{item['check_id']}: {shorten(item['message'], 120)} ({item.get('field') or 'value'}: "
        f"recorded {item.get('expected')!r}, observed {item.get('observed')!r})"
        for item in found[:2]
    )
    return f" (~release: {shown})"


def _why(cell: dict[str, Any]) -> str:
    """The cell's reason, with what its first finding expected and observed, and the tests that
    did not pass (a parametrised case names the request that differs)."""
    why = shorten(cell["reason"], 160)
    found = (cell.get("evidence") or [{}])[0]
    if found.get("expected") is not None or found.get("observed") is not None:
        field = found.get("field") or "value"
        why += f" ({field}: expected {found.get('expected')!r}, observed {found.get('observed')!r})"
    cases = [
        test["nodeid"].rsplit("::", 1)[-1]
        for test in cell.get("tests") or ()
        if test.get("outcome") in ("fail", "error")
    ]
    return why + (f" in {', '.join(cases)}" if cases else "")


def _ends(text: str, limit: int = 300) -> str:
    """A long cause's start and end: a launch failure's own error is the last line of its
    log tail."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return f"{text[:80]} ... {text[-(limit - 85) :]}"


def _cells(matrix: dict[str, Any], target: dict[str, Any]) -> str:
    if target.get("unreached"):
        return f"not reached: {_ends(target['unreached'])}".replace("|", "\\|")
    cells = [row["cells"][target["id"]] for row in matrix["capabilities"]]
    outcomes = [cell["outcome"] for cell in cells]
    counted = ", ".join(f"{outcomes.count(o)} {o}" for o in COUNTED if outcomes.count(o))
    flagged = sum(1 for cell in cells if cell.get("release_differences"))
    return counted + (f" ({flagged} with a release difference)" if flagged else "")


def replace_block(document: str, lines: list[str]) -> str:
    """`document` with the block between the markers `lines` begins and ends with replaced by
    `lines` (appended at the end when it has no such block yet)."""
    block = "\n".join(lines)
    begin, end = lines[0], lines[-1]
    if begin in document and end in document:
        head, rest = document.split(begin, 1)
        _, tail = rest.split(end, 1)
        return head + block + tail
    return document.rstrip("\n") + "\n\n" + block + "\n"
