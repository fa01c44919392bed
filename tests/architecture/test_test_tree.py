"""The test tree mirrors the house: each folder under `tests/` is named for the package it tests
(`rl_conformance/<package>`), or is one of the few folders that test something else, each for its
reason. A catch-all folder for tests of several packages does not come back."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BESIDE_THE_PACKAGES = {
    "architecture": "the house's rules, over every package",
    "deploy": "the shipped deployment files and nightly recipes (deploy/)",
    "docs": "the front door and the guides",
    "dynamo": "our toy engine behind the real Dynamo runtime (fake_backends/dynamo), and the "
    "fakes held to the real frontend and listener (differentials)",
    "e2e": "whole runs against our fakes and the real Dynamo, vLLM and SGLang",
    "fake_backends": "the fake deployments (fake_backends/), one folder per subpackage",
    "schema_examples": "the JSON Schemas' example documents (schemas/)",
}


def test_each_test_folder_is_named_for_what_it_tests() -> None:
    packages = {
        path.name
        for path in (ROOT / "rl_conformance").iterdir()
        if path.is_dir() and (path / "__init__.py").exists()
    }
    folders = {
        path.name
        for path in (ROOT / "tests").iterdir()
        if path.is_dir() and not path.name.startswith(("_", "."))
    }
    unexplained = folders - packages - set(BESIDE_THE_PACKAGES)
    assert not unexplained, f"test folders named for no package: {sorted(unexplained)}"
    assert not set(BESIDE_THE_PACKAGES) - folders, "a listed folder is gone: update the list"


def test_the_fakes_tests_mirror_the_fakes_subpackages() -> None:
    """`tests/fake_backends/<subpackage>/test_*.py` tests `fake_backends/<subpackage>/`; only the
    shared fixtures and helpers sit at the folder's top."""
    subpackages = {
        path.name
        for path in (ROOT / "fake_backends").iterdir()
        if path.is_dir() and (path / "__init__.py").exists()
    }
    tests = ROOT / "tests" / "fake_backends"
    folders = {path.name for path in tests.iterdir() if path.is_dir() and path.name[0] != "_"}
    assert folders, "the fakes' tests are in no subpackage folder"
    assert not folders - subpackages, f"named for no subpackage: {sorted(folders - subpackages)}"
    loose = sorted(path.name for path in tests.glob("test_*.py"))
    assert not loose, f"put each beside the subpackage it tests: {loose}"
