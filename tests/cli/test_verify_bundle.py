"""`rl-conformance verify-bundle` says what it proved: with the digest the run printed, that the
files are the run's; without it, only that the directory agrees with its own bundle.json (an
edit that rewrote bundle.json too passes), said on its verdict line and warned; a bundle.json
that is not an index is one sentence."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rl_conformance.cli import main
from rl_conformance.reports.bundle import write_index


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "matrix.json").write_text(json.dumps({"exit_status": 1, "summary": {"fail": 2}}))
    (tmp_path / "matrix.md").write_text("2 fail\n")
    return tmp_path, write_index(tmp_path)


def edit_matrix_and_its_index(directory: Path) -> None:
    """What the issue's tamperer did: a failing run made to pass, its index rewritten to match."""
    matrix = directory / "matrix.json"
    matrix.write_text(json.dumps({"exit_status": 0, "summary": {"fail": 0}}))
    index = json.loads((directory / "bundle.json").read_text())
    for entry in index["files"]:
        if entry["path"] == "matrix.json":
            entry["sha256"] = hashlib.sha256(matrix.read_bytes()).hexdigest()
    (directory / "bundle.json").write_text(json.dumps(index))


def test_without_the_digest_it_says_it_checked_self_consistency_only(
    sealed: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    directory, _ = sealed
    edit_matrix_and_its_index(directory)
    assert main(["verify-bundle", str(directory)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"{directory}: self-consistent only")
    assert "give --sha256" in out
    assert err == "rl-conformance: verify-bundle without --sha256 checked self-consistency only\n"


def test_with_the_digest_the_same_edit_is_found(
    sealed: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    directory, digest = sealed
    assert main(["verify-bundle", str(directory), "--sha256", digest]) == 0
    assert "every file is one the run wrote" in capsys.readouterr().out
    edit_matrix_and_its_index(directory)
    assert main(["verify-bundle", str(directory), "--sha256", digest]) == 1
    assert capsys.readouterr().out.startswith("bundle.json: its sha256 is")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("nope", "bundle.json: not JSON"),
        ("[]", "observed list []"),
        ('{"x": 1}', "observed an object with `x`"),
        ('{"files": [1]}', "files[0] is int 1"),
        ('{"files": [{"path": "a"}]}', "files[0] is an object with `path`"),
        ('{"files": [], "missing_uris": 3}', "`missing_uris` is int 3"),
    ],
)
def test_a_bundle_json_that_is_not_an_index_is_one_sentence(
    sealed: tuple[Path, str], text: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    directory, _ = sealed
    (directory / "bundle.json").write_text(text)
    assert main(["verify-bundle", str(directory)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"rl-conformance: verify-bundle {directory}: bundle.json: ")
    assert said in err and len(err.splitlines()) == 1


def test_a_digest_that_is_not_one_is_refused(
    sealed: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    directory, _ = sealed
    assert main(["verify-bundle", str(directory), "--sha256", "<that digest>"]) == 2
    assert "expected the 64 hexadecimal digits" in capsys.readouterr().err
