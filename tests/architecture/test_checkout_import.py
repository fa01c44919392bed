"""The package works from a bare checkout on `sys.path`, with nothing installed: its checks find
the schemas, and the runner the suites, beside the package (`rl_conformance/data_dirs.py`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
sys.meta_path = [finder for finder in sys.meta_path if "Editable" not in repr(finder)]
sys.path.insert(0, sys.argv[1])
import rl_conformance.checks
from rl_conformance.checks.schema_registry import schema_names
from rl_conformance.plugin.runner import suites_dir
assert rl_conformance.checks.__file__.startswith(sys.argv[1]), rl_conformance.checks.__file__
print(len(schema_names()), suites_dir())
"""


def test_the_checks_and_the_suites_are_found_from_a_bare_checkout(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    count, suites = done.stdout.split()
    assert int(count) == len(list((ROOT / "schemas").glob("*.json")))
    assert Path(suites) == ROOT / "suites"
