"""The matrix as one self-contained HTML page (no network, no external assets): the failures
first, as a list of links; then one grid, grouped by contract area, each cell the outcome as a
word on its full colour; filters by level, outcome and target; every cell opening its evidence
(the requirement, checks, expected and observed values, the curl reproducer with a copy button,
the wire-log excerpt and file, timings) in a side panel."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from . import differences
from .markdown import exit_rule_text, target_release

OUTCOMES = ("pass", "fail", "error", "unsupported", "not-advertised", "skipped")

STYLE = """
:root { --pass:#d7f5dd; --fail:#ffc9c9; --error:#ff9e9e; --unsupported:#e9e9e9;
        --not-advertised:#f3efc9; --skipped:#f6f6f6; }
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1b1b1b; }
header p { margin: .2rem 0; }
.banner { background: #ffe08a; padding: .5rem 1rem; font-weight: bold; }
.banner.warning { background: #b3261e; color: #fff; }
.filters { margin: 1rem 0; display: flex; gap: 1rem; flex-wrap: wrap; }
.summary span { margin-right: .8rem; }
table { border-collapse: collapse; margin-bottom: 1.5rem; }
th, td { border: 1px solid #c8c8c8; padding: .25rem .5rem; vertical-align: top; text-align: left; }
th.capability { max-width: 26rem; font-weight: normal; }
td.cell { min-width: 7rem; padding: 0; }
td.cell button { width: 100%; height: 100%; min-height: 2.2rem; border: 0; font: inherit;
                 cursor: pointer; text-align: left; padding: .25rem .5rem;
                 background: transparent; color: inherit; }
.o-pass { background: var(--pass); } .o-fail { background: var(--fail); font-weight: bold; }
.o-error { background: var(--error); font-weight: bold; }
.o-unsupported { background: var(--unsupported); }
.o-not-advertised { background: var(--not-advertised); }
.o-skipped { background: var(--skipped); }
.summary span { padding: .1rem .4rem; border-radius: .3rem; }
.summary span.zero { background: none; color: #777; font-weight: normal; }
tr.area-row th { background: #eef1f6; font-size: 1.05rem; padding: .4rem .5rem; }
#failures li { margin: .2rem 0; }
button.copy { margin-left: .5rem; font-size: .8rem; }
td.cell button:focus { outline: 3px solid #3b6fd8; }
#panel { position: fixed; top: 0; right: 0; width: min(44rem, 55vw); height: 100vh;
         overflow: auto; background: #fff; border-left: 2px solid #888; padding: 1rem;
         box-shadow: -4px 0 12px #0002; }
#panel pre { white-space: pre-wrap; word-break: break-all; background: #f4f4f4; padding: .5rem;
             font-size: .8rem; }
#panel dt { font-weight: bold; margin-top: .6rem; }
.hidden { display: none; }
"""

SCRIPT = """
(function () {
  const panel = document.getElementById('panel');
  const body = document.getElementById('panel-body');
  function open(button) {
    const template = document.getElementById(button.dataset.evidence);
    body.replaceChildren(template.content.cloneNode(true));
    panel.hidden = false;
    panel.dataset.showing = button.dataset.evidence;
    document.querySelectorAll('td.cell button[aria-expanded="true"]').forEach(function (b) {
      b.setAttribute('aria-expanded', 'false');
    });
    button.setAttribute('aria-expanded', 'true');
  }
  document.querySelectorAll('td.cell button').forEach(function (button) {
    button.addEventListener('click', function () { open(button); });
  });
  document.querySelectorAll('#failures a[data-cell]').forEach(function (link) {
    link.addEventListener('click', function () {
      const button = document.querySelector('#' + link.dataset.cell + ' button');
      if (button) { open(button); }
    });
  });
  body.addEventListener('click', function (event) {
    const copy = event.target.closest('button.copy');
    if (!copy) { return; }
    const text = copy.parentElement.querySelector('pre').textContent;
    function done(word) { copy.textContent = word; }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done('copied'); },
                                               function () { done('select and copy'); });
    } else {
      const range = document.createRange();
      range.selectNodeContents(copy.parentElement.querySelector('pre'));
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      done(document.execCommand && document.execCommand('copy') ? 'copied' : 'selected');
    }
  });
  document.getElementById('panel-close').addEventListener('click', function () {
    panel.hidden = true;
  });
  document.addEventListener('keydown', function (event) {
    if (event.key === 'Escape') { panel.hidden = true; }
  });
  const level = document.getElementById('filter-level');
  const outcome = document.getElementById('filter-outcome');
  const target = document.getElementById('filter-target');
  function apply() {
    document.querySelectorAll('[data-target-column]').forEach(function (element) {
      const shown = !target.value || element.dataset.targetColumn === target.value;
      element.classList.toggle('hidden', !shown);
    });
    document.querySelectorAll('tr.capability-row').forEach(function (row) {
      let shown = !level.value || row.dataset.level === level.value;
      if (shown && outcome.value) {
        shown = Array.from(row.querySelectorAll('td.cell')).some(function (cell) {
          return cell.dataset.outcome === outcome.value &&
            (!target.value || cell.dataset.targetColumn === target.value);
        });
      }
      row.classList.toggle('hidden', !shown);
    });
    document.querySelectorAll('tr.area-row').forEach(function (header) {
      const rows = document.querySelectorAll(
        'tr.capability-row[data-area="' + header.dataset.area + '"]:not(.hidden)');
      header.classList.toggle('hidden', rows.length === 0);
    });
  }
  [level, outcome, target].forEach(function (select) { select.addEventListener('change', apply); });
})();
"""


def _options(values: list[str], label: str) -> str:
    options = [f"<option value=''>every {escape(label)}</option>"]
    options += [f"<option value='{escape(v)}'>{escape(v)}</option>" for v in values]
    return "".join(options)


def _value(value: Any) -> str:
    return escape(json.dumps(value, ensure_ascii=False, default=str)[:2000])


def _evidence(
    row: dict[str, Any], target: dict[str, Any], cell: dict[str, Any], identifier: str
) -> str:
    spec = row["spec"]
    parts = [
        f"<template id='{identifier}'>",
        f"<h2>{escape(cell['outcome'].upper())}: <code>{escape(row['id'])}</code> on "
        f"<code>{escape(target['id'])}</code></h2>",
        f"<p>{escape(row['title'])}</p><dl>",
        f"<dt>requirement ({escape(row['level'])}, {escape(spec['section'])})</dt>",
        f"<dd><q>{escape(spec['quote'])}</q></dd>",
        f"<dt>reason</dt><dd>{escape(cell['reason'])}</dd>",
        f"<dt>documented for {escape(target['backend'])}</dt><dd>{escape(cell['documented'])}"
        + (" (the observation contradicts it)" if cell.get("contradicts_documentation") else "")
        + "</dd>",
    ]
    if cell["checks"]:
        checks = ", ".join(
            f"{escape(c['id'])} ({escape(c['outcome'])}, {c['count']}x)" for c in cell["checks"]
        )
        parts.append(f"<dt>checks</dt><dd>{checks}</dd>")
    for item in cell.get("release_differences", []):
        parts.append(
            f"<dt>release difference, check {escape(item['check_id'])}</dt>"
            f"<dd>{escape(item['message'])}<br>observed <code>{_value(item.get('observed'))}"
            f"</code>; not a failure: {escape(differences.source_of(item['check_id']))}</dd>"
        )
    for item in cell["evidence"]:
        parts.append(
            f"<dt>check {escape(item['check_id'])}</dt><dd>{escape(item['message'])}"
            f"<br>field <code>{escape(item.get('field') or '-')}</code>: expected "
            f"<code>{_value(item.get('expected'))}</code>, observed "
            f"<code>{_value(item.get('observed'))}</code></dd>"
        )
        if item.get("reproducer"):
            parts.append(
                "<dt>reproduce</dt><dd><button type='button' class='copy'>copy</button>"
                f"<pre class='reproducer'>{escape(item['reproducer'])}</pre></dd>"
            )
        if item.get("wire_log"):
            parts.append(
                f"<dt>wire log (<a href='{escape(item['wire_log'])}'>"
                f"{escape(item['wire_log'])}</a>)</dt>"
                f"<dd><pre class='wire'>{escape(item.get('wire_excerpt', ''))}</pre></dd>"
            )
    tests = "".join(
        f"<li><code>{escape(t['nodeid'])}</code>: {escape(t['outcome'])}, {t['duration_s']} s</li>"
        for t in cell["tests"]
    )
    parts.append(f"<dt>tests ({cell['duration_s']} s)</dt><dd><ul>{tests}</ul></dd>")
    parts.append("</dl></template>")
    return "".join(parts)


def _environment(matrix: dict[str, Any]) -> str:
    env = matrix.get("environment") or {}
    rows = (
        [
            f"<li>{escape(str(env.get('python')))} on {escape(str(env.get('platform')))}, "
            f"{escape(str(env.get('cpus')))} CPUs, host {escape(str(env.get('host')))}; "
            f"<code>{escape(' '.join(env.get('command', [])))}</code></li>"
        ]
        if env
        else []
    )
    recorded = matrix.get("recorded") or {}
    if recorded:
        facts = ", ".join(
            f"{escape(str(k))} {escape(str(item.get('value')))}" for k, item in recorded.items()
        )
        rows.append(
            f"<li class='recorded'>recorded by the user (--record, not observed): {facts}</li>"
        )
    for target in matrix["targets"]:
        topology = target.get("topology") or {}
        shown = "; ".join(f"{escape(str(k))} {escape(str(v))}" for k, v in topology.items())
        rows.append(
            f"<li><code>{escape(target['id'])}</code> ({escape(target['backend'])}, "
            f"{escape(target['kind'])}; {escape(target_release(target))}): "
            f"model {escape(str(target.get('model')))}; {shown}"
            f"<br><span class='versions'>versions: {_versions(target)}</span></li>"
        )
    return f"<details><summary>environment</summary><ul>{''.join(rows)}</ul></details>"


def _versions(target: dict[str, Any]) -> str:
    """Each version with where it was read."""
    sources = target.get("version_sources") or {}
    shown = []
    for key, value in (target.get("versions") or {}).items():
        source = sources.get(key)
        where = f" <small>[{escape(str(source))}]</small>" if source else ""
        shown.append(f"{escape(str(key))} {escape(str(value))}{where}")
    return "; ".join(shown) or "none observed"


def render_html(matrix: dict[str, Any]) -> str:
    targets = matrix["targets"]
    rows = matrix["capabilities"]
    areas: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        areas.setdefault(row.get("area") or "other", []).append(row)
    summary = "".join(
        f"<span class='o-{escape(name)}{' zero' if not count else ''}'>{count} {escape(name)}"
        "</span>"
        for name, count in matrix["summary"].items()
    )
    suite = matrix["suite"]
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{escape(suite['name'])} matrix</title><style>{STYLE}</style></head><body>",
        *(f"<p class='banner warning'>{escape(w)}</p>" for w in matrix.get("warnings", [])),
        f"<header><h1>Conformance matrix</h1><p>{escape(suite['name'])} "
        f"{escape(suite['version'])}, started {escape(matrix['started_at'])}, "
        f"{matrix['duration_s']} s, seed {escape(str(matrix['seed']))}</p>",
        f"<p class='summary'>{summary}</p>{_environment(matrix)}</header>",
    ]
    if not matrix["complete"]:
        why = matrix.get("incomplete_reason") or "interrupted before every test ran"
        parts.append(f"<p class='banner'>Incomplete run: {escape(why)}.</p>")
    for target in targets:
        if target.get("unreached"):
            parts.append(
                f"<p class='banner unreached'>Not reached: <code>{escape(target['id'])}</code>: "
                f"{escape(target['unreached'])}</p>"
            )
    if exit_rule_text(matrix):
        parts.append(f"<p class='exit-rule'>{escape(exit_rule_text(matrix))}</p>")
    cells = _cell_ids(areas, targets)
    parts.append(_failures(areas, targets, cells))
    levels = sorted({row["level"] for row in rows})
    parts.append(
        "<div class='filters'>"
        f"<label>level <select id='filter-level'>{_options(levels, 'level')}</select></label>"
        f"<label>outcome <select id='filter-outcome'>{_options(list(OUTCOMES), 'outcome')}"
        "</select></label>"
        f"<label>target <select id='filter-target'>"
        f"{_options([t['id'] for t in targets], 'target')}</select></label></div>"
    )
    parts.append("<table id='grid'><thead><tr><th>capability</th><th>level</th>")
    for target in targets:
        parts.append(
            f"<th data-target-column='{escape(target['id'])}'>{escape(target['id'])}<br>"
            f"<small>{escape(target['backend'])}, {escape(target['kind'])}</small></th>"
        )
    parts.append("</tr></thead><tbody>")
    templates = []
    for area, area_rows in areas.items():
        parts.append(
            f"<tr class='area-row' data-area='{escape(area)}'>"
            f"<th colspan='{2 + len(targets)}' scope='rowgroup'>{escape(area)}</th></tr>"
        )
        for row in area_rows:
            parts.append(
                f"<tr class='capability-row' data-area='{escape(area)}' "
                f"data-level='{escape(row['level'])}'>"
                f"<th class='capability' scope='row'><code>{escape(row['id'])}</code><br>"
                f"{escape(row['title'])}</th><td>{escape(row['level'])}</td>"
            )
            for target in targets:
                cell = row["cells"][target["id"]]
                identifier = cells[(row["id"], target["id"])]
                templates.append(_evidence(row, target, cell, f"evidence-{identifier}"))
                outcome = escape(cell["outcome"])
                flag = " (!doc)" if cell.get("contradicts_documentation") else ""
                flag += f" {differences.LABEL}" if cell.get("release_differences") else ""
                parts.append(
                    f"<td id='cell-{identifier}' class='cell o-{outcome}' "
                    f"data-outcome='{outcome}' data-target-column='{escape(target['id'])}'>"
                    f"<button type='button' data-evidence='evidence-{identifier}' "
                    f"aria-expanded='false' title='{escape(cell['reason'][:300])}'>"
                    f"{outcome}{flag}</button></td>"
                )
            parts.append("</tr>")
    parts.append("</tbody></table>")
    parts.append(
        "<aside id='panel' hidden aria-live='polite'><button type='button' id='panel-close'>"
        "close</button><div id='panel-body'></div></aside>"
    )
    parts += templates
    parts.append(f"<script>{SCRIPT}</script></body></html>\n")
    return "".join(parts)


def _cell_ids(
    areas: dict[str, list[dict[str, Any]]], targets: list[dict[str, Any]]
) -> dict[tuple[str, str], int]:
    """Each cell's number, in the grid's order: its anchor and its evidence are named by it."""
    ordered = [(row["id"], t["id"]) for rows in areas.values() for row in rows for t in targets]
    return {key: number for number, key in enumerate(ordered)}


def _failures(
    areas: dict[str, list[dict[str, Any]]],
    targets: list[dict[str, Any]],
    cells: dict[tuple[str, str], int],
) -> str:
    """The failing cells first, each a link to its cell that also opens its evidence; the cells
    of a target the run never reached are its banner, not a list."""
    unreached = {target["id"] for target in targets if target.get("unreached")}
    items = []
    for rows in areas.values():
        for row in rows:
            for target in targets:
                cell = row["cells"][target["id"]]
                if cell["outcome"] not in ("fail", "error") or target["id"] in unreached:
                    continue
                number = cells[(row["id"], target["id"])]
                items.append(
                    f"<li><a href='#cell-{number}' data-cell='cell-{number}'>"
                    f"{escape(cell['outcome'].upper())} <code>{escape(row['id'])}</code> on "
                    f"<code>{escape(target['id'])}</code></a>: "
                    f"{escape(cell['reason'][:300])}</li>"
                )
    if not items:
        return "<section id='failures'><h2>Failures (0)</h2></section>"
    listed = "".join(items)
    return f"<section id='failures'><h2>Failures ({len(items)})</h2><ol>{listed}</ol></section>"
