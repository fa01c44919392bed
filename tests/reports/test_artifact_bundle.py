"""`artifact-bundle.json` (dynamo.rl.artifact-bundle.v1) follows the rules of Dynamo's
`docs/fern/scripts/rl_artifact_bundle.py`: canonical `artifact://bundle/` URIs, no path out of
the bundle, every artifact a record names a regular file of it; `check-artifact-bundle` refuses
a traversal URI or a missing file in one sentence."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.cli import main
from rl_conformance.reports.artifact_bundle import (
    INDEX,
    SCHEMA,
    BundleRefused,
    build_index,
    path_for,
    uri_for,
    verify,
    write_artifact_bundle,
)

UPSTREAM = json.loads(
    (
        Path(__file__).resolve().parents[2] / "fixtures" / "upstream" / "rl-artifact-bundle.json"
    ).read_text()
)


def bundle(root: Path, artifacts: list[str]) -> Path:
    """A report directory with one validation record naming `artifacts`."""
    (root / "cells").mkdir(parents=True)
    (root / "cells" / "a.json").write_text('{"outcome": "pass"}\n')
    (root / "validation").mkdir()
    record: dict[str, Any] = {
        "schema": "dynamo.rl.validation.v1",
        "record_state": "passed",
        "gates": {"generation_smoke": {"status": "passed", "artifacts": artifacts}},
    }
    (root / "validation" / "t.json").write_text(json.dumps(record))
    return root


def test_a_run_directory_is_indexed_with_the_upstream_fields(tmp_path: Path) -> None:
    root = bundle(tmp_path, ["artifact://bundle/cells/a.json"])
    digest = write_artifact_bundle(root)
    index = json.loads((root / INDEX).read_text())
    assert index["schema"] == SCHEMA
    assert set(UPSTREAM["index_fields"]) <= set(index)
    assert set(UPSTREAM["record_entry_fields"]) == set(index["records"][0])
    assert set(UPSTREAM["artifact_entry_fields"]) == set(index["artifacts"][0])
    assert index["artifacts"][0]["sha256"] == hashlib.sha256(b'{"outcome": "pass"}\n').hexdigest()
    assert index["closure_status"] == "incomplete"  # upstream's: the run writes one record of 3
    assert any("missing required record schemas" in f for f in index["findings"])
    assert verify(root, digest) == []
    assert main(["check-artifact-bundle", str(root), "--sha256", digest]) == 0
    assert main(["check-artifact-bundle", str(root), "--publication-gate"]) == 1


@pytest.mark.parametrize(
    ("uri", "said"),
    [
        ("artifact://bundle/../secret.json", "without '.' or '..'"),
        ("artifact://bundle/cells/%2E%2E/%2E%2E/x", "without '.' or '..'"),
        ("artifact://bundle/cells/a.json?x=1", "query or fragment"),
        ("artifact://bundle//etc/passwd", "one absolute path"),
        ("artifact://bundle/cells/%61.json", "not the canonical URI"),
    ],
)
def test_an_unsafe_uri_is_refused_in_one_sentence(
    tmp_path: Path, uri: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(BundleRefused, match=said):
        path_for(uri)
    root = bundle(tmp_path, ["artifact://bundle/cells/a.json"])
    write_artifact_bundle(root)
    record = json.loads((root / "validation" / "t.json").read_text())
    record["gates"]["generation_smoke"]["artifacts"].append(uri)
    (root / "validation" / "t.json").write_text(json.dumps(record))
    capsys.readouterr()
    assert main(["check-artifact-bundle", str(root)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err and uri in err, err


def test_a_missing_file_is_refused_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = bundle(tmp_path, ["artifact://bundle/cells/a.json"])
    write_artifact_bundle(root)
    (root / "cells" / "a.json").unlink()
    capsys.readouterr()
    assert main(["check-artifact-bundle", str(root)]) == 1
    out = capsys.readouterr().out.strip()
    assert out == "missing local artifacts: artifact://bundle/cells/a.json", out
    (root / INDEX).unlink()
    assert main(["check-artifact-bundle", str(root)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"index {INDEX}: no such file in the bundle"), err


def test_a_changed_artifact_or_a_symbolic_link_is_a_finding(tmp_path: Path) -> None:
    root = bundle(tmp_path, ["artifact://bundle/cells/a.json"])
    write_artifact_bundle(root)
    (root / "cells" / "a.json").write_text('{"outcome": "fail"}\n')
    assert verify(root, None) == [
        "artifact artifact://bundle/cells/a.json: sha256 differs from the index"
    ]
    (root / "cells" / "a.json").unlink()
    (root / "cells" / "a.json").symlink_to(root / "validation" / "t.json")
    assert "missing local artifacts" in verify(root, None)[0]


def test_canonical_uris_round_trip() -> None:
    for relative in ("cells/fake-vllm/errors.validation.json", "wire/a b.json"):
        assert path_for(uri_for(relative)) == relative
    assert path_for("https://example.com/x") is None  # external, listed, not closed
    with pytest.raises(BundleRefused):
        build_index(Path("/nonexistent"), [])
