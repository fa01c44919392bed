"""One report directory holds one run: a directory a previous run wrote is refused unless the
user asks to replace it, replacing clears it (no stale validation record, cell or log is then
attested by the new bundle), and a directory holding anything else is never cleared."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_conformance.errors import ConfigurationError
from rl_conformance.reports.directory import claim


def _previous_run(directory: Path) -> None:
    (directory / "validation").mkdir(parents=True)
    (directory / "validation" / "old-target.json").write_text("{}")
    (directory / "matrix.json").write_text("{}")
    (directory / "bundle.json").write_text("{}")


def test_a_new_or_empty_directory_is_taken_as_it_is(tmp_path: Path) -> None:
    claim(tmp_path / "new", overwrite=False)
    claim(tmp_path, overwrite=False)
    assert not (tmp_path / "new").exists()


def test_a_previous_runs_report_is_refused_naming_the_way_out(tmp_path: Path) -> None:
    _previous_run(tmp_path)
    with pytest.raises(ConfigurationError, match="already holds a run's report: give --overwrite"):
        claim(tmp_path, overwrite=False)
    assert (tmp_path / "validation" / "old-target.json").exists()


def test_overwrite_clears_the_previous_run(tmp_path: Path) -> None:
    _previous_run(tmp_path)
    claim(tmp_path, overwrite=True)
    assert list(tmp_path.iterdir()) == []


def test_a_directory_no_run_wrote_is_never_cleared(tmp_path: Path) -> None:
    _previous_run(tmp_path)
    (tmp_path / "thesis.tex").write_text("mine")
    with pytest.raises(ConfigurationError, match=r"files no run wrote \(thesis.tex\)"):
        claim(tmp_path, overwrite=True)
    assert (tmp_path / "thesis.tex").read_text() == "mine"
    assert (tmp_path / "matrix.json").exists()


def test_a_file_is_not_a_report_directory(tmp_path: Path) -> None:
    target = tmp_path / "report"
    target.write_text("")
    with pytest.raises(ConfigurationError, match="expected a directory, observed a file"):
        claim(target, overwrite=True, flag="--report-dir")


@pytest.mark.slow
def test_a_second_run_into_the_same_directory_needs_overwrite(tmp_path: Path) -> None:
    from tests.certify.cli_runs import run_cli

    arguments = ("--reference", "--scenario", "iteration", "--jobs", "4")
    first = run_cli(tmp_path, *arguments)
    assert first.returncode == 0, first.stderr[-2000:]
    stale = tmp_path / "audit" / "left-by-an-older-run.json"
    stale.write_text("{}")
    second = run_cli(tmp_path, *arguments)
    assert second.returncode == 2
    assert "--overwrite" in second.stderr
    third = run_cli(tmp_path, *arguments, "--overwrite")
    assert third.returncode == 0, third.stderr[-2000:]
    assert not stale.exists() and (tmp_path / "bundle.json").exists()


def test_report_leaves_a_finished_run_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rl_conformance.cli import main

    finished = '{"complete": true, "finished_at": "2026-12-04T21:00:00Z", "exit_status": 1}'
    (tmp_path / "matrix.json").write_text(finished)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["report", str(tmp_path)]) == 1  # the finished run's own status
    assert "nothing to rebuild, nothing changed" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "matrix.json").read_text() == finished
