"""The HTML matrix in a real browser (Debian's headless Chromium): it loads without a console
message, a failing cell's evidence opens on click and shows the requirement, the expected and
observed values, the reproducer (with a copy button) and the wire log, the filters hide what
they should, the cells are their outcome's full colour (computed styles), a zero count is muted,
the failures come first as links that open their evidence, and a screenshot is kept
($RL_CONFORMANCE_ARTIFACTS, else the test's directory)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
FAULT = "selected_logprobs_one_short"
HEADLESS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars")

# The harness loads the report in a frame (same directory, file access allowed) and acts on it
# through the DOM, as a user's click does: element.click() dispatches the real click event.
HARNESS = """<!doctype html><html><body><pre id="out">pending</pre>
<iframe id="frame" src="matrix.html" width="1400" height="900"></iframe>
<script>
const frame = document.getElementById('frame');
frame.addEventListener('load', function () {
  const result = {};
  try {
    const doc = frame.contentDocument;
    const panel = doc.getElementById('panel');
    const failing = doc.querySelector('td.cell[data-outcome="fail"] button');
    result.failing_cells = doc.querySelectorAll('td.cell[data-outcome="fail"]').length;
    result.hidden_before = panel.hidden;
    failing.click();
    result.hidden_after = panel.hidden;
    result.expanded = failing.getAttribute('aria-expanded');
    result.panel = panel.innerText;
    result.wire_link = (panel.querySelector('a') || {}).href || null;
    const outcome = doc.getElementById('filter-outcome');
    result.rows = doc.querySelectorAll('tr.capability-row:not(.hidden)').length;
    outcome.value = 'fail';
    outcome.dispatchEvent(new Event('change'));
    result.rows_failing = doc.querySelectorAll('tr.capability-row:not(.hidden)').length;
    result.areas_shown = doc.querySelectorAll('tr.area-row:not(.hidden)').length;
    const view = frame.contentWindow;
    const colour = function (element) { return view.getComputedStyle(element).backgroundColor; };
    const passCell = doc.querySelector('td.cell[data-outcome="pass"]');
    const failCell = doc.querySelector('td.cell[data-outcome="fail"]');
    result.colours = {
      pass_cell: colour(passCell), fail_cell: colour(failCell),
      pass_button: colour(passCell.querySelector('button')),
      zero_badge: colour(doc.querySelector('.summary span.zero')),
      fail_badge: colour(doc.querySelector('.summary span.o-fail')),
      zero_count: doc.querySelector('.summary span.zero').textContent,
    };
    result.tables = doc.querySelectorAll('table').length;
    panel.hidden = true;
    const links = doc.querySelectorAll('#failures li a');
    result.failures_heading = doc.querySelector('#failures h2').textContent;
    result.failure_links = links.length;
    links[0].click();
    result.link_opens = !panel.hidden &&
      panel.dataset.showing === 'evidence-' + links[0].getAttribute('href').slice(6);
    result.link_target = links[0].getAttribute('href');
    result.copy_buttons = panel.querySelectorAll('button.copy').length;
  } catch (error) {
    result.error = String(error);
  }
  document.getElementById('out').textContent = JSON.stringify(result);
});
</script></body></html>
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("html-report")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "run",
            "-q",
            "--fake",
            "vllm",
            "--fault",
            FAULT,
            "--capability",
            "logprobs.selected_alignment",
            "--capability",
            "tokens.completion_ids",
            "--capability",
            "generate.native_route",
            "--report-dir",
            str(directory),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (directory / "matrix.html").exists()
    return directory


def browse(chromium: str, page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *HEADLESS, "--enable-logging=stderr", "--v=0", *flags, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def console_messages(stderr: str, page: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line and page in line]


def test_the_report_loads_without_console_messages(chromium: str, report: Path) -> None:
    done = browse(chromium, report / "matrix.html", "--dump-dom", "--virtual-time-budget=3000")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "capability-row" in done.stdout
    assert console_messages(done.stderr, "matrix.html") == []
    assert not re.search(r"""(src|href)=['"]?https?://""", (report / "matrix.html").read_text())


def test_a_failing_cell_opens_its_evidence_on_click(chromium: str, report: Path) -> None:
    (report / "harness.html").write_text(HARNESS)
    done = browse(
        chromium,
        report / "harness.html",
        "--allow-file-access-from-files",
        "--virtual-time-budget=5000",
        "--dump-dom",
    )
    found = re.search(r'<pre id="out">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(
        found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )
    assert "error" not in result, result
    assert result["failing_cells"] == 1
    assert result["hidden_before"] is True and result["hidden_after"] is False
    assert result["expanded"] == "true"
    panel = result["panel"]
    assert "FAIL: logprobs.selected_alignment on fake-vllm" in panel
    assert "Selected log probabilities match those token IDs in length and order." in panel
    assert "expected 1, observed 0" in panel
    assert "curl -sS -X POST" in panel
    assert result["wire_link"].endswith(".json") and "/wire/" in result["wire_link"]
    wire = json.loads((report / result["wire_link"].split(str(report) + "/")[-1]).read_text())
    assert wire["status"] == 200 and wire["request"]["method"] == "POST"
    assert result["rows_failing"] == 1 < result["rows"]
    assert result["areas_shown"] == 1
    colours = result["colours"]
    assert (
        colours["pass_cell"] == "rgb(215, 245, 221)"
        and colours["fail_cell"] == "rgb(255, 201, 201)"
    )
    assert colours["pass_button"] == "rgba(0, 0, 0, 0)"  # the cell's colour shows through
    assert colours["fail_badge"] == "rgb(255, 201, 201)"
    assert colours["zero_badge"] == "rgba(0, 0, 0, 0)" and colours["zero_count"].startswith("0 ")
    assert result["tables"] == 1  # one grid
    assert result["failures_heading"] == "Failures (1)" and result["failure_links"] == 1
    assert result["link_opens"] is True and result["link_target"].startswith("#cell-")
    assert result["copy_buttons"] >= 1
    assert console_messages(done.stderr, "matrix.html") == []


def test_a_screenshot_is_kept(chromium: str, report: Path, tmp_path: Path) -> None:
    keep = Path(os.environ.get("RL_CONFORMANCE_ARTIFACTS") or tmp_path)
    keep.mkdir(parents=True, exist_ok=True)
    shot = keep / "matrix.png"
    done = browse(
        chromium,
        report / "matrix.html",
        f"--screenshot={shot}",
        "--window-size=1400,900",
        "--virtual-time-budget=3000",
    )
    assert shot.exists() and shot.stat().st_size > 10_000, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
