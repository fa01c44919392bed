"""A CI owner's first week, night by night, as the nightly recipes run it (`rl-conformance run`
against a deployment by URL, then `rl-conformance baseline --markdown --fail-on-coverage-loss`):
a first night with a typo in `--model`, one whose frontend is still starting, good nights, a
wrong RL URL, a night cut by `--run-timeout`, one cut by Ctrl-C midway, an expired token, a
mistyped flag, a mistyped `--worker` id. No night pages on a regression, no night needs a person
to reset the baseline, each night that is not comparable says why in its first line, and the
first comparable night seeds the baseline whatever came before.

Cost: eleven runs of a fake deployment by URL on a handful of capabilities, about 40 s on a
2-core machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_backends import FakeDeployment
from fake_backends.deployment.credentials import RequiredCredentials

pytestmark = pytest.mark.slow

TOKEN = "nightly-token-5d1e8a0c3f"
CAPABILITIES = (
    "tokens.token_input",
    "tokens.completion_ids",
    "stream.done_last",
    "discovery.protocol_version",
    "discovery.schema",
    "logprobs.selected_alignment",
    "errors.validation",
)
TIMEOUT_S = 300


@pytest.fixture(scope="module")
def fleet() -> Iterator[FakeDeployment]:
    required = RequiredCredentials.parse(
        [f"frontend=Authorization: Bearer {TOKEN}", f"rl=Authorization: Bearer {TOKEN}"], []
    )
    with FakeDeployment("vllm", workers=1, credentials=required) as deployment:
        yield deployment


class Week:
    def __init__(self, fleet: FakeDeployment, home: Path) -> None:
        self.fleet = fleet
        self.home = home
        self.night = 0

    def flags(self, **changes: str) -> list[str]:
        given = {
            "--frontend": self.fleet.frontend_url,
            "--rl-url": self.fleet.rl_url,
            "--backend": "vllm",
            "--token-env": "DYNAMO_TOKEN",
            **{f"--{name.replace('_', '-')}": value for name, value in changes.items()},
        }
        return [part for pair in given.items() for part in pair if part]

    def run(
        self, *flags: str, token: str = TOKEN, interrupt_after_records: int = 0
    ) -> tuple[int, Path]:
        """One night's run; with `interrupt_after_records`, Ctrl-C once that many test records
        are in its journal."""
        self.night += 1
        report = self.home / f"night-{self.night}"
        capabilities = [part for name in CAPABILITIES for part in ("--capability", name)]
        command = [sys.executable, "-m", "rl_conformance", "run", "-q", "--report-dir"]
        command += [str(report), *capabilities, *flags]
        env = {**os.environ, "DYNAMO_TOKEN": token}
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        if interrupt_after_records:
            journal = report / "records.jsonl"
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline and process.poll() is None:
                if journal.exists() and len(journal.read_text().splitlines()) > (
                    interrupt_after_records
                ):
                    process.send_signal(signal.SIGINT)
                    break
                time.sleep(0.02)
        output, _ = process.communicate(timeout=TIMEOUT_S)
        assert "Traceback" not in output, output
        return process.returncode, report

    def baseline(self, report: Path) -> tuple[int, str]:
        command = [sys.executable, "-m", "rl_conformance", "baseline", "--markdown"]
        command += ["--fail-on-coverage-loss", str(self.home / "baseline"), str(report)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert "Traceback" not in done.stdout + done.stderr, done.stderr
        return done.returncode, done.stdout

    def kept(self) -> dict[str, Any] | None:
        path = self.home / "baseline" / "matrix.json"
        return json.loads(path.read_text()) if path.exists() else None

    def not_comparable(self, report: Path, cause: str, needle: str) -> dict[str, Any] | None:
        """`baseline` exits 3, names tonight's cause in its first line, reports no regression
        and keeps the baseline it had; returns it."""
        before = self.kept()
        status, said = self.baseline(report)
        assert status == 3, said
        first = said.splitlines()[0].strip("*")
        assert first.startswith(f"not comparable: NEW {cause}: "), said
        assert needle in first, said
        assert "Regressions" not in said and "Coverage lost" not in said, said
        assert self.kept() == before
        return before


def test_a_first_week_never_pages_on_a_regression_nor_needs_a_reset(
    fleet: FakeDeployment, tmp_path: Path
) -> None:
    week = Week(fleet, tmp_path)

    status, report = week.run(*week.flags(model="toyy"))  # a typo in --model
    assert status == 2
    week.not_comparable(report, "preflight refused", "--model toyy is not served")
    assert week.kept() is None

    status, report = week.run(*week.flags(frontend="http://127.0.0.1:9"))  # not up yet
    assert status == 3
    week.not_comparable(report, "not reached", "the frontend did not answer")
    assert week.kept() is None

    status, report = week.run(*week.flags())  # the first good night seeds the baseline
    assert status == 0
    status, said = week.baseline(report)
    assert status == 0 and "No baseline yet: this matrix is the baseline" in said
    seeded = week.kept()
    assert seeded is not None and seeded["comparable"] is True

    status, report = week.run(*week.flags())
    assert status == 0
    status, said = week.baseline(report)
    assert status == 0 and "0 regression(s)" in said and "the next baseline" in said

    status, report = week.run(*week.flags(rl_url=f"{fleet.frontend_url}/v1"))  # wrong RL URL
    assert status == 2
    week.not_comparable(report, "preflight refused", "is the frontend's OpenAI base URL")

    slow = ("--header", "x-fake-delay-ms: 400")  # tonight each generation takes 0.4 s
    status, report = week.run(*week.flags(), *slow, "--run-timeout", "1.5")
    assert status == 124
    week.not_comparable(report, "timed out", "--run-timeout")

    status, report = week.run(*week.flags(), interrupt_after_records=2)  # Ctrl-C midway
    assert status == 130
    cut = json.loads((report / "matrix.json").read_text())
    reached = [
        row["id"] for row in cut["capabilities"] if not row["cells"]["external-vllm"].get("not_run")
    ]
    assert reached and len(reached) < len(CAPABILITIES), reached
    week.not_comparable(report, "interrupted", "SIGINT")
    _, said = week.baseline(report)
    assert f"{len(CAPABILITIES) - len(reached)} cell(s) not run" in said

    status, report = week.run(*week.flags(), token="expired-token-000000")
    assert status == 3
    week.not_comparable(report, "not authorised", "refused the credentials given")

    status, report = week.run(*week.flags(), "--fronted", fleet.frontend_url)  # a flag typo
    assert status == 2 and not (report / "matrix.json").exists()
    status, said = week.baseline(report)
    assert status == 3 and said.startswith("not comparable: no matrix was written")

    worker = str(fleet.workers[0]["instance_id"])
    typo = worker[:-2] + worker[-1] + worker[-2]
    status, report = week.run(*week.flags(), "--allow-mutations", "--worker", typo)
    assert status == 2
    week.not_comparable(report, "preflight refused", f"did you mean --worker {worker}?")

    status, report = week.run(*week.flags())  # a good night again: compared, kept
    assert status == 0
    status, said = week.baseline(report)
    assert status == 0 and "0 regression(s)" in said and "the next baseline" in said
