"""What the guides say a command gives is what it gives, held by running the command: the
budget a dry run plans (docs/NIGHTLY.md), the size of the fast test subset (README.md,
CONTRIBUTING.md), the evidence commands after the default run (docs/EVIDENCE.md), `profiles`
in the directory `run` wrote and what it answers on our fakes, and the Python example
(docs/DEPLOYMENTS.md), run as written against a fake deployment. About a minute on a loaded
2-core machine: one default run, one `profiles`, two dry runs, one run from Python, one
collection of the fast tests."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fake_backends.deployment.assembly import FakeDeployment

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "rl_conformance"]


def text_of(path: str) -> str:
    return " ".join((ROOT / path).read_text().split())


def rl_conformance(*argv: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *argv], capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False
    )


def said(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`rl-conformance run` as the quick start has it: ./conformance-report, and its digest."""
    directory = tmp_path_factory.mktemp("workspace")
    done = rl_conformance("run", "-q", cwd=directory)
    assert done.returncode == 0, said(done)
    digest = re.search(r"bundle\.json sha256 ([0-9a-f]{64})", done.stdout)
    assert digest, said(done)
    return directory, digest.group(1)


def test_the_evidence_commands_run_after_the_default_run(workspace: tuple[Path, str]) -> None:
    """docs/EVIDENCE.md's commands, verbatim but for the digest the run printed: the record
    they name is one the default run wrote (the artifact bundle's, one its own run wrote), and
    each exits as the guide says."""
    directory, digest = workspace
    guide = (ROOT / "docs" / "EVIDENCE.md").read_text()
    blocks = re.findall(r"^```bash\n(.*?)^```", guide, flags=re.MULTILINE | re.DOTALL)
    commands = [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if line.startswith("rl-conformance ")
    ]
    assert len(commands) == 6, commands
    for command in commands:
        argv = shlex.split(command.replace("<the digest the run printed>", digest))[1:]
        done = rl_conformance(*argv, cwd=directory)
        publication = "--publication-gate" in argv  # a deployment run alone never meets it
        assert done.returncode == (1 if publication else 0), f"{command}\n{said(done)}"
        assert "cannot read" not in done.stderr and "no such" not in done.stderr.lower()
        if argv[0] == "verify-bundle":
            assert "every file is one the run wrote" in done.stdout
        if argv[0] == "check-artifact-bundle" and not publication:
            assert done.stdout.strip().endswith("artifact-bundle.json: no finding"), said(done)


def test_profiles_runs_where_run_wrote_and_answers_as_documented(
    workspace: tuple[Path, str],
) -> None:
    directory, _ = workspace
    done = rl_conformance("profiles", "-q", cwd=directory)
    assert done.returncode == 0, said(done)
    matrix = json.loads((directory / "profiles-report" / "matrix.json").read_text())
    rows = {row["id"]: row["cells"] for row in matrix["capabilities"]}
    generation = rows["profile.generation"]
    for column, cell in generation.items():
        framework = column.split("@", 1)[0]
        assert cell["outcome"] == ("fail" if framework == "slime" else "pass"), (column, cell)
    guide = text_of("docs/DEPLOYMENTS.md")
    assert "On our fakes and the real 1.6.1 frontend: NeMo RL, verl and prime-rl generate" in guide
    refresh = rows["profile.refresh_surface"]
    for framework in ("nemo-rl", "prime-rl"):
        assert refresh[f"{framework}@fake-vllm"]["outcome"] == "pass"
        assert refresh[f"{framework}@fake-vllm-sidecar"]["outcome"] == "fail"


def coverage_of(directory: Path, *flags: str) -> dict[str, int]:
    done = rl_conformance("run", "--dry-run", "--report-dir", "plan", *flags, cwd=directory)
    assert done.returncode == 0, said(done)
    plan = json.loads((directory / "plan" / "plan.json").read_text())
    figures = {json.dumps(target["coverage"]) for target in plan["targets"].values()}
    assert len(figures) == 1, figures  # the guide states one figure for every fake
    return json.loads(figures.pop())


def test_the_nightly_budget_figures_are_the_dry_runs(tmp_path: Path) -> None:
    (tmp_path / "all").mkdir()
    (tmp_path / "read-only").mkdir()
    every = coverage_of(tmp_path / "all")
    read_only = coverage_of(tmp_path / "read-only", "--read-only")
    expected = (
        f"on our fakes at `--examples 8`, {every['generations']} generation requests per target, "
        f"{every['generations_fewest_examples']} with property tests at 2 examples; "
        f"{read_only['generations']} and {read_only['generations_fewest_examples']} when "
        "read-only"
    )
    assert expected in text_of("docs/NIGHTLY.md"), f"docs/NIGHTLY.md should say: {expected}"


def test_the_python_example_runs_as_written(tmp_path: Path) -> None:
    """docs/DEPLOYMENTS.md's Python block, its HOST placeholders made a fake deployment's URLs."""
    guide = (ROOT / "docs" / "DEPLOYMENTS.md").read_text()
    (block,) = re.findall(r"^```python\n(.*?)^```", guide, flags=re.MULTILINE | re.DOTALL)
    with FakeDeployment("vllm") as fleet:
        script = block.replace("http://HOST:8000", fleet.frontend_url).replace(
            "http://HOST:8001", fleet.rl_url
        )
        assert "HOST" not in script
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            check=False,
        )
    assert done.returncode == 0, said(done)
    status, summary = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert status == "0" and "'pass'" in summary, said(done)
    assert (tmp_path / "python-report" / "matrix.json").is_file()


def test_the_fast_subset_is_about_as_large_as_said() -> None:
    """README.md and CONTRIBUTING.md say how many tests `-m "not slow"` runs: within 15%."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow", "-n", "0"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    found = re.search(r"(\d+)/\d+ tests collected", done.stdout)
    assert found, done.stdout[-2000:] + done.stderr[-2000:]
    collected = int(found.group(1))
    for path in ("README.md", "CONTRIBUTING.md"):
        (stated,) = re.findall(r"about ([\d,]+) tests", text_of(path))
        figure = int(stated.replace(",", ""))
        assert abs(collected - figure) <= 0.15 * figure, (path, figure, collected)
