"""Markdown rendering of the matrix, shaped for a CI step summary: the failures first (each with
its requirement, expected and observed values, reproducer and wire log), then the release
differences (`differences`), then the table, then the reasons of every other cell that did not
pass."""

from __future__ import annotations

from typing import Any

from ..model.releases import MAIN, UNKNOWN_SOURCE, release_text
from . import differences

SYMBOL = {
    "pass": "pass",
    "fail": "**FAIL**",
    "unsupported": "unsupported",
    "not-advertised": "not-advertised",
    "skipped": "skipped",
    "error": "**ERROR**",
}
FAILING = ("fail", "error")
TABLE_HEADING = "## Matrix"
OTHERS_HEADING = "## Other cells that did not pass"


def cell_text(cell: dict[str, Any]) -> str:
    text = SYMBOL.get(cell["outcome"], cell["outcome"])
    if cell.get("contradicts_documentation"):
        text += " (!doc)"
    if cell.get("release_differences"):
        text += f" {differences.LABEL}"
    return text


def render_table(matrix: dict[str, Any]) -> list[str]:
    targets = [target["id"] for target in matrix["targets"]]
    lines = ["| capability | level | " + " | ".join(targets) + " |"]
    lines.append("|---|---|" + "---|" * len(targets))
    for row in matrix["capabilities"]:
        cells = [cell_text(row["cells"][target]) for target in targets]
        lines.append(
            f"| `{row['id']}` {row['title']} | {row['level']} | " + " | ".join(cells) + " |"
        )
    lines += ["", "(!doc) = the observation contradicts the spec's documented support."]
    if differences.flagged(matrix):
        lines.append(f"{differences.LABEL} = a release difference: no spec sentence fixes it.")
    return lines


def render_failure(row: dict[str, Any], target: str, cell: dict[str, Any]) -> list[str]:
    """One failing cell: the requirement it breaks and everything needed to see it again."""
    spec = row["spec"]
    lines = [
        f"### {cell['outcome'].upper()} `{row['id']}` on `{target}`",
        "",
        f"- requirement ({row['level']}, {spec['section']}): {spec['quote']}",
        f"- observed: {_short(cell['reason'], 400)}",
    ]
    for item in cell["evidence"][:3]:
        lines.append(f"- check `{item['check_id']}`: {_short(item['message'], 400)}")
        if item.get("field") or item.get("expected") is not None:
            lines.append(
                f"  - field `{item.get('field') or '-'}`: expected `{_short(item['expected'])}`, "
                f"observed `{_short(item['observed'])}`"
            )
        if item.get("reproducer"):
            lines.append(f"  - reproduce: `{_short(item['reproducer'], 2000)}`")
        if item.get("wire_log"):
            lines.append(f"  - wire log: [{item['wire_log']}]({item['wire_log']})")
    lines.append("")
    return lines


def render_environment(matrix: dict[str, Any]) -> list[str]:
    """Where the run happened and what each target showed of itself."""
    env = matrix.get("environment") or {}
    lines = []
    if env:
        lines.append(
            f"Environment: {env.get('python')} on {env.get('platform')} ({env.get('cpus')} CPUs, "
            f"host {env.get('host')}); command `{_short(' '.join(env.get('command', [])), 400)}`."
        )
    recorded = recorded_text(matrix)
    if recorded:
        lines.append(f"Recorded by the user (--record, not observed): {_short(recorded, 600)}.")
    for target in matrix["targets"]:
        topology = target.get("topology") or {}
        shown = ", ".join(f"{k} {v}" for k, v in topology.items())
        lines.append(
            f"- `{target['id']}` ({target['backend']}, {target['kind']}; {target_release(target)})"
            f": model {target.get('model')}; {shown or 'topology not read'}"
        )
        lines.append(f"  - versions: {_short(versions_text(target), 600)}")
    return [*lines, ""] if lines else []


def target_release(target: dict[str, Any]) -> str:
    """The target's Dynamo release as `matrix.json` states it, with how it is known."""
    return release_text(
        str(target.get("dynamo_release") or MAIN),
        str(target.get("dynamo_release_source") or UNKNOWN_SOURCE),
        (target.get("version_sources") or {}).get("dynamo"),
    )


def exit_rule_text(matrix: dict[str, Any]) -> str:
    """What decided the exit status, when it is not a conformance run's rule."""
    rule = matrix.get("exit_rule")
    if not rule:
        return ""
    text = f"Exit status {matrix['exit_status']}: only {' or '.join(rule['failing'])} cells count"
    if rule.get("exempt"):
        text += "; not counted: " + "; ".join(
            f"{target} ({why})" for target, why in rule["exempt"].items()
        )
    if rule.get("problems"):
        text += "; failed: " + "; ".join(rule["problems"])
    return text + "."


def versions_text(target: dict[str, Any]) -> str:
    """A target's versions, each with where it was read: `dynamo 1.6.1 [frontend GET ...]`."""
    sources = target.get("version_sources") or {}
    shown = [
        f"{key} {value}" + (f" [{sources[key]}]" if sources.get(key) else "")
        for key, value in (target.get("versions") or {}).items()
    ]
    return "; ".join(shown) or "none observed"


def recorded_text(matrix: dict[str, Any]) -> str:
    """The `--record` facts of the run: `vllm 0.11.0, gpu H100`."""
    return ", ".join(f"{k} {item['value']}" for k, item in (matrix.get("recorded") or {}).items())


def render_markdown(matrix: dict[str, Any]) -> str:
    targets = [target["id"] for target in matrix["targets"]]
    lines = [line for warning in matrix.get("warnings", []) for line in (f"**{warning}**", "")]
    lines += [f"# Conformance matrix ({matrix['suite']['name']} {matrix['suite']['version']})", ""]
    if not matrix["complete"]:
        why = matrix.get("incomplete_reason") or "interrupted before every test ran"
        lines += [f"**Incomplete run: {why}.**", ""]
    summary = ", ".join(f"{count} {name}" for name, count in matrix["summary"].items() if count)
    lines += [
        f"Started {matrix['started_at']}, {matrix['duration_s']} s, seed {matrix['seed']}. "
        f"Cells: {summary}.",
        "",
    ]
    if exit_rule_text(matrix):
        lines += [_short(exit_rule_text(matrix), 2000), ""]
    lines += render_environment(matrix)
    failures = [
        (row, target, row["cells"][target])
        for row in matrix["capabilities"]
        for target in targets
        if row["cells"][target]["outcome"] in FAILING
    ]
    if failures:
        lines += [f"## Failures ({len(failures)})", ""]
        for row, target, cell in failures:
            lines += render_failure(row, target, cell)
    lines += differences.markdown_lines(matrix)
    lines += [TABLE_HEADING, "", *render_table(matrix), ""]
    others = []
    for row in matrix["capabilities"]:
        for target in targets:
            cell = row["cells"][target]
            if cell["outcome"] == "pass" or cell["outcome"] in FAILING:
                continue
            others.append(f"- `{row['id']}` on `{target}`: {cell['outcome']}: {cell['reason']}")
    if others:
        lines += [OTHERS_HEADING, "", *others, ""]
    return "\n".join(lines).rstrip() + "\n"


def _short(value: Any, limit: int = 160) -> str:
    text = str(value).replace("`", "'").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
