"""A canary secret in every way credentials come in (a `--header` value, a header file, a token
file, a token variable, a query parameter marked secret, URL user information) appears in no
byte a run writes or prints, against a fake that requires them all, with failures (wire logs,
cells, reproducers) and their reproducers replayed; the reproducers still replay. A plane that
refuses is one sentence and exit 3.

Cost: two runs of one fake deployment by URL (about 10 s on a 2-core machine) and one refusal."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_backends import FakeDeployment
from fake_backends.deployment.credentials import RequiredCredentials

pytestmark = pytest.mark.slow

CANARIES = {
    "header": "canary-header-4f1c9e7a2b",
    "header_file": "canary-headerfile-8d2e6b1f0c",
    "token_env": "canary-tokenenv-3a7f5c9d1e",
    "token_file": "canary-tokenfile-6b0e2d8a4f",
    "query": "canary-query-9c4a1f7e3d",
    "userinfo": "canary-userinfo-2e8b6d0a5c",
}
FAULTS = ("usage_counts_wrong", "protocol_version_2")
"""A frontend failure and a listener failure: wire logs, cells and reproducers get written."""


@pytest.fixture(scope="module")
def fleet() -> Iterator[FakeDeployment]:
    required = RequiredCredentials.parse(
        [
            f"frontend=Authorization: Bearer {CANARIES['token_env']}",
            f"frontend=X-Api-Key: {CANARIES['header']}",
            f"rl=Authorization: Bearer {CANARIES['token_env']}",
            f"rl=X-Listener-Key: {CANARIES['header_file']}",
            f"system=Authorization: Bearer {CANARIES['token_file']}",
        ],
        [f"frontend=key={CANARIES['query']}"],
    )
    with FakeDeployment("vllm", workers=1, faults=FAULTS, credentials=required) as deployment:
        yield deployment


def run(directory: Path, *arguments: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    report = directory / "report"
    env = {**os.environ, "DYNAMO_TOKEN": CANARIES["token_env"]}
    command = [sys.executable, "-m", "rl_conformance", "run", "--report-dir", str(report)]
    done = subprocess.run(
        [*command, *arguments], capture_output=True, text=True, timeout=600, env=env
    )
    return done, report


def leaks(done: subprocess.CompletedProcess[str], report: Path) -> dict[str, list[str]]:
    """Each canary and where it appears: every file under the report, and stdout and stderr."""
    found: dict[str, list[str]] = {}
    places: list[tuple[str, bytes]] = [
        ("stdout", done.stdout.encode()),
        ("stderr", done.stderr.encode()),
    ]
    if report.exists():
        places += [
            (str(path.relative_to(report)), path.read_bytes())
            for path in sorted(report.rglob("*"))
            if path.is_file()
        ]
    for name, canary in CANARIES.items():
        hits = [where for where, data in places if canary.encode() in data]
        if hits:
            found[name] = hits
    return found


def secrets(directory: Path) -> list[str]:
    (directory / "token").write_text(CANARIES["token_file"] + "\n")
    (directory / "headers").write_text(f"X-Listener-Key: {CANARIES['header_file']}\n")
    return [
        "--token-env",
        "DYNAMO_TOKEN",
        "--header",
        f"X-Api-Key: {CANARIES['header']}",
        "--rl-header",
        f"@{directory / 'headers'}",
        "--admin-token-file",
        str(directory / "token"),
        "--secret-query-param",
        "key",
    ]


def test_no_canary_is_written_or_printed_and_the_reproducers_replay(
    fleet: FakeDeployment, tmp_path: Path
) -> None:
    done, report = run(
        tmp_path,
        "--frontend",
        f"{fleet.frontend_url}/?key={CANARIES['query']}&tenant=rl",
        "--rl-url",
        fleet.rl_url,
        "--backend",
        "vllm",
        "--allow-mutations",
        "--all-workers",
        "--verify-reproducers",
        *secrets(tmp_path),
    )
    assert (report / "matrix.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    matrix: dict[str, Any] = json.loads((report / "matrix.json").read_text())
    outcomes = [cell["outcome"] for row in matrix["capabilities"] for cell in row["cells"].values()]
    assert outcomes.count("pass") > 20, "every plane was answered"
    assert "fail" in outcomes and list(report.glob("wire/*.json")), "failures were written"
    assert not leaks(done, report)
    evidence = [
        item
        for row in matrix["capabilities"]
        for cell in row["cells"].values()
        for item in cell.get("evidence", [])
    ]
    reproducers = " ".join(str(item.get("reproducer")) for item in evidence)
    assert '-H "Authorization: Bearer $DYNAMO_TOKEN"' in reproducers
    assert "key=$FRONTEND_KEY" in reproducers and "$FRONTEND_X_API_KEY" in reproducers
    if shutil.which("curl"):
        assert any(item.get("reproduced") is True for item in evidence), [
            item.get("reproduction") for item in evidence
        ]


def test_a_missing_credential_is_one_sentence_and_exit_3(
    fleet: FakeDeployment, tmp_path: Path
) -> None:
    done, report = run(
        tmp_path,
        "-q",
        "--frontend",
        f"{fleet.frontend_url}/?key={CANARIES['query']}",
        "--rl-url",
        fleet.rl_url,
        "--backend",
        "vllm",
        "--secret-query-param",
        "key",
        "--header",
        f"X-Api-Key: {CANARIES['header']}",
    )
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    matrix = json.loads((report / "matrix.json").read_text())
    (target,) = matrix["targets"]
    assert target["unreached"].startswith(f"external-vllm: the frontend at {fleet.frontend_url} ")
    assert "refused the credentials given (--header X-Api-Key" in target["unreached"]
    assert "--token-env VAR" in target["unreached"]
    outcomes = {cell["outcome"] for row in matrix["capabilities"] for cell in row["cells"].values()}
    assert outcomes == {"error"}
    assert not leaks(done, report)


def test_credentials_in_a_url_are_refused_and_never_shown(
    fleet: FakeDeployment, tmp_path: Path
) -> None:
    frontend = fleet.frontend_url.replace("http://", f"http://alice:{CANARIES['userinfo']}@")
    done, report = run(tmp_path, "--frontend", frontend, "--backend", "vllm")
    assert done.returncode == 2
    assert "--frontend: expected a URL without credentials" in done.stderr
    assert not leaks(done, report)
