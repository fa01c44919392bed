"""Dynamo's evidence written beside the matrix: a run record per deployment or adapter
(`validation/<subject>.json`), the user's recorded metadata kept with them, and the bundle index
(`bundle.json`) over the whole report directory, written last."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..redaction import write_text
from . import externalise_wire_logs
from .artifact_bundle import record_paths, write_artifact_bundle
from .bundle import write_index
from .validation import VALIDATION_DIR, write_validation_records

META_FILE = "record-meta.json"


def kept_meta(directory: Path) -> dict[str, Any] | None:
    """The metadata a run recorded with its records (what `rl-conformance report` reuses)."""
    path = directory / VALIDATION_DIR / META_FILE
    if not path.is_file():
        return None
    document = json.loads(path.read_text(encoding="utf-8"))
    return document if isinstance(document, dict) else None


def write_records(
    directory: Path,
    matrix: Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
    integration_artifacts: Mapping[str, str] | None = None,
) -> list[Path]:
    """The records of `matrix` (the document `write_reports` wrote in `directory`), naming the
    wire logs it saved there."""
    document = externalise_wire_logs(dict(matrix), directory)
    written = write_validation_records(document, directory, meta, integration_artifacts)
    if meta:
        path = directory / VALIDATION_DIR / META_FILE
        write_text(path, json.dumps(dict(meta), indent=2) + "\n")
    return written


def seal(directory: Path, artifact_bundle: bool = False) -> str:
    """Write the bundle index; its sha256. `artifact_bundle` (`--artifact-bundle`): first the
    same evidence as Dynamo's `dynamo.rl.artifact-bundle.v1` (`artifact-bundle.json`), which
    the bundle index then lists with the other files; a run with no record writes none."""
    if artifact_bundle and record_paths(directory):
        write_artifact_bundle(directory)
    return write_index(directory)


def sealed_line(digest: str) -> str:
    return (
        f"evidence: {VALIDATION_DIR}/<target>.json (dynamo.rl.validation.v1); bundle.json sha256 "
        f"{digest} (keep it: rl-conformance verify-bundle DIR --sha256 {digest})"
    )
