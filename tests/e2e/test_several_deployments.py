"""Two deployments reached by URL, as a CI owner's vLLM and SGLang fleets are, in one run of
`rl-conformance run --targets fleets.toml`: one matrix with a column per table, one bundle, one
journal; each fleet with its own credentials (the SGLang one asks for a token, named in the file
by its variable only) and its own mutation rule (the vLLM one allows one worker, the SGLang one
none). The fleets are our fakes started as a user starts them, `python -m fake_backends`, each
on its own ports. A token refused leaves that column not reached while the other is judged, and
`diff` calls that column alone not comparable.

Cost: two runs of two fake deployments by URL (about 25 s on a 2-core machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_backends import read_ready_line

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
TOKEN = "sglang-fleet-token-7c3e9a1f5b"
WRONG = "an-expired-token-0d4b8f2a6c"


def start(*arguments: str) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "fake_backends", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=REPO,
    )
    assert process.stdout is not None
    return process, read_ready_line(process.stdout, timeout=60)


@pytest.fixture
def fleets() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """A vLLM fleet and an SGLang fleet whose frontend and listener take a bearer token; fresh
    for each run, since a run that updates a worker leaves it on its last checkpoint."""
    started = []
    try:
        started.append(start("vllm", "--workers", "2"))
        started.append(
            start(
                "sglang",
                "--workers",
                "1",
                "--require-header",
                f"frontend=Authorization: Bearer {TOKEN}",
                "--require-header",
                f"rl=Authorization: Bearer {TOKEN}",
            )
        )
        yield started[0][1], started[1][1]
    finally:
        for process, _ in started:
            process.terminate()
        for process, _ in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def targets_file(directory: Path, vllm: dict[str, Any], sglang: dict[str, Any]) -> Path:
    chosen = vllm["workers"][0]["instance_id"]
    path = directory / "fleets.toml"
    path.write_text(
        f"""# a vLLM fleet and an SGLang fleet, one column each
[vllm-prod]
frontend = "{vllm["frontend"]}"
rl_url = "{vllm["rl"]}"
backend = "vllm"
allow_mutations = true
workers = [{chosen}]

[sglang-prod]
frontend = "{sglang["frontend"]}"
rl_url = "{sglang["rl"]}"
backend = "sglang"
worker_urls = ["{sglang["workers"][0]["system_url"]}"]
token_env = "SGLANG_TOKEN"
"""
    )
    return path


def run(directory: Path, token: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SGLANG_TOKEN": token}
    command = [sys.executable, "-m", "rl_conformance", *arguments]
    return subprocess.run(
        command, cwd=directory, capture_output=True, text=True, timeout=900, env=env
    )


def cells(matrix: dict[str, Any], column: str) -> dict[str, dict[str, Any]]:
    return {row["id"]: row["cells"][column] for row in matrix["capabilities"]}


def said(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-3000:]}"


def test_two_deployments_give_one_matrix_with_a_column_each(
    fleets: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    vllm, sglang = fleets
    targets_file(tmp_path, vllm, sglang)
    done = run(tmp_path, TOKEN, "run", "--targets", "fleets.toml", "-q")
    assert done.returncode == 0, said(done)
    report = tmp_path / "conformance-report"
    matrix = json.loads((report / "matrix.json").read_text())
    assert [target["id"] for target in matrix["targets"]] == ["vllm-prod", "sglang-prod"]
    assert all(list(row["cells"]) == ["vllm-prod", "sglang-prod"] for row in matrix["capabilities"])
    assert not any(target.get("unreached") for target in matrix["targets"])
    for column in ("vllm-prod", "sglang-prod"):
        outcomes = [cell["outcome"] for cell in cells(matrix, column).values()]
        assert outcomes.count("pass") > 20, (column, outcomes)
    # each fleet under its own rule: the vLLM table allows one worker, the SGLang table none
    assert cells(matrix, "vllm-prod")["refresh.version_verified"]["outcome"] == "pass"
    refused = cells(matrix, "sglang-prod")["refresh.version_verified"]
    assert refused["outcome"] == "skipped"
    assert "allow_mutations = true" in refused["reason"] and "[sglang-prod]" in refused["reason"]
    # one run: one journal, one bundle; the token appears in nothing it wrote or printed
    assert (report / "records.jsonl").is_file() and (report / "bundle.json").is_file()
    written = [path.read_bytes() for path in report.rglob("*") if path.is_file()]
    assert not any(TOKEN.encode() in data for data in written)
    assert TOKEN not in done.stdout + done.stderr
    # and the matrix is a baseline its next night compares with, column by column
    compared = run(
        tmp_path, TOKEN, "diff", str(report / "matrix.json"), str(report / "matrix.json")
    )
    assert compared.returncode == 0, said(compared)


def test_a_refused_token_leaves_its_column_alone_not_reached(
    fleets: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    vllm, sglang = fleets
    targets_file(tmp_path, vllm, sglang)
    done = run(tmp_path, WRONG, "run", "--targets", "fleets.toml", "-q", "--report-dir", "night")
    assert done.returncode == 3, said(done)
    matrix = json.loads((tmp_path / "night" / "matrix.json").read_text())
    unreached = {target["id"]: target.get("unreached") for target in matrix["targets"]}
    assert unreached["vllm-prod"] is None
    assert "refused the credentials given (fleets.toml [sglang-prod] token_env SGLANG_TOKEN;" in (
        unreached["sglang-prod"] or ""
    )
    assert {cell["outcome"] for cell in cells(matrix, "sglang-prod").values()} == {"error"}
    assert [cell["outcome"] for cell in cells(matrix, "vllm-prod").values()].count("pass") > 20
    assert WRONG not in done.stdout + done.stderr
    assert not any(
        WRONG.encode() in path.read_bytes()
        for path in (tmp_path / "night").rglob("*")
        if path.is_file()
    )
    compared = run(
        tmp_path,
        WRONG,
        "diff",
        str(tmp_path / "night" / "matrix.json"),
        str(tmp_path / "night" / "matrix.json"),
    )
    assert compared.returncode == 3, said(compared)
    assert "sglang-prod: " in compared.stdout and "vllm-prod: " not in compared.stdout
