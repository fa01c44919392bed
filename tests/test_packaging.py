"""The built wheel carries the suites, schemas and fakes, and runs from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(ROOT), "-w", str(out)],
        check=True,
        capture_output=True,
    )
    return next(out.glob("*.whl"))


def test_wheel_carries_schemas_suites_and_fakes(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    schemas = {Path(name).name for name in names if name.startswith("rl_conformance/schemas/")}
    assert {p.name for p in (ROOT / "schemas").glob("*.json")} <= schemas
    assert {f"rl_conformance/suites/{p.name}" for p in (ROOT / "suites").glob("test_*.py")} <= names
    fakes = {p.relative_to(ROOT).as_posix() for p in (ROOT / "fake_backends").rglob("*.py")}
    assert {name for name in fakes if "__pycache__" not in name} <= names
    harness = {p.relative_to(ROOT).as_posix() for p in (ROOT / "rl_conformance").rglob("*.py")}
    assert {name for name in harness if "__pycache__" not in name} <= names
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "rl-conformance = rl_conformance.cli:command" in text
    assert "pytest11" not in text  # the plugin is loaded by a run, never into other sessions


def test_installed_wheel_runs_from_another_directory(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site))
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from rl_conformance.cli import main; sys.exit(main(sys.argv[2:]))",
            str(site),
            "run",
            "-q",
            "--fake",
            "vllm",
            "--capability",
            "discovery.protocol_version",
            "--report-dir",
            "report",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    matrix = json.loads((work / "report" / "matrix.json").read_text())
    assert matrix["capabilities"][0]["cells"]["fake-vllm"]["outcome"] == "pass"
    import_check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "import rl_conformance, fake_backends; print(rl_conformance.__file__); "
            "print(fake_backends.__file__)",
            str(site),
        ],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    )
    assert all(line.startswith(str(site)) for line in import_check.stdout.split())
