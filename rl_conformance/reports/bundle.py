"""A content-addressed index of a report directory (`bundle.json`), so a reviewer can tell the
evidence was not edited after the run: the sha256 and size of every file, the validation records
and whether every `artifact://bundle/...` URI they name is a file of the bundle. The index's own
digest, printed at the end of a run, is the anchor to keep elsewhere; `rl-conformance
verify-bundle DIR --sha256 DIGEST` checks the index against it and every file against the index.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..redaction import redact, write_text
from .record_rules import structure_findings
from .validation import VALIDATION_DIR, bundle_uri

SCHEMA = "rl-conformance.bundle.v1"
INDEX = "bundle.json"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _members(root: Path) -> tuple[list[str], list[str]]:
    """Regular files below `root` (relative, sorted) and the symbolic links refused."""
    files, links = [], []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            links.append(relative)
        elif path.is_file() and relative != INDEX and not relative.endswith(".tmp"):
            files.append(relative)
    return files, links


def uri_path(uri: str) -> str | None:
    """The relative path of an `artifact://bundle/...` URI; None for any other URI."""
    parts = urlsplit(uri)
    if parts.scheme != "artifact" or parts.netloc != "bundle":
        return None
    path = unquote(parts.path).lstrip("/")
    if not path or any(part in ("", ".", "..") for part in path.split("/")):
        return None
    return path


def _references(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for key, child in value.items():
            if key == "artifacts" and isinstance(child, list):
                found.update(item for item in child if isinstance(item, str))
            else:
                found |= _references(child)
    elif isinstance(value, list):
        for child in value:
            found |= _references(child)
    return found


def build_index(root: Path) -> dict[str, Any]:
    files, links = _members(root)
    entries = [
        {
            "path": relative,
            "uri": bundle_uri(relative),
            "sha256": sha256_of(root / relative),
            "size_bytes": (root / relative).stat().st_size,
        }
        for relative in files
    ]
    records = []
    referenced: set[str] = set()
    for relative in files:
        if not (relative.startswith(f"{VALIDATION_DIR}/") and relative.endswith(".json")):
            continue
        try:
            record = json.loads((root / relative).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or record.get("schema") != "dynamo.rl.validation.v1":
            continue
        referenced |= _references(record)
        records.append(
            {
                "path": relative,
                "record_state": record.get("record_state"),
                "structure_findings": structure_findings(record),
            }
        )
    present = set(files)
    missing = sorted(
        u for u in referenced if uri_path(u) is not None and uri_path(u) not in present
    )
    external = sorted(u for u in referenced if uri_path(u) is None)
    return {
        "schema": SCHEMA,
        "root": ".",
        "closure_status": "complete" if not (missing or external or links) else "incomplete",
        "files": entries,
        "records": records,
        "referenced_uri_count": len(referenced),
        "missing_uris": missing,
        "external_uris": external,
        "symbolic_links_refused": links,
    }


def write_index(root: Path) -> str:
    """Write `bundle.json`; returns its sha256 (the digest to keep elsewhere)."""
    text = redact(json.dumps(build_index(root), indent=2) + "\n")
    path = root / INDEX
    temporary = path.with_suffix(".json.tmp")
    write_text(temporary, text)
    temporary.replace(path)
    return hashlib.sha256(text.encode()).hexdigest()


def verify_index(root: Path, expected_sha256: str | None = None) -> list[str]:
    """What differs between the directory and its index (nothing: an empty list). Without
    `expected_sha256` only self-consistency is checked: an edit that also rewrote the index
    passes; the digest the run printed anchors the index itself."""
    path = root / INDEX
    if not path.is_file():
        return [f"{INDEX}: no such file in {root}"]
    if expected_sha256 is not None and sha256_of(path) != expected_sha256.lower():
        return [f"{INDEX}: its sha256 is {sha256_of(path)}, not the anchored {expected_sha256}"]
    index = read_index(path)
    if isinstance(index, str):
        return [index]
    listed = {entry["path"]: entry for entry in index["files"]}
    findings = []
    files, links = _members(root)
    for relative in files:
        entry = listed.get(relative)
        if entry is None:
            findings.append(f"{relative}: added after the index was written")
        elif sha256_of(root / relative) != entry["sha256"]:
            findings.append(f"{relative}: changed (sha256 differs from the index)")
    for relative in sorted(set(listed) - set(files)):
        findings.append(f"{relative}: in the index, missing from the directory")
    findings += [f"{relative}: a symbolic link (refused)" for relative in links]
    findings += [f"{uri}: named by a record, not in the bundle" for uri in index["missing_uris"]]
    return findings


def read_index(path: Path) -> dict[str, Any] | str:
    """The index at `path`, or one sentence saying why it is not one a run wrote."""
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return f"{INDEX}: cannot be read ({exc})"
    except ValueError as exc:
        return f"{INDEX}: not JSON ({exc}), so not an index a run wrote"
    shape = "an object with `files`, a list of objects each with a `path` and a `sha256` string"
    if not isinstance(index, dict) or not isinstance(index.get("files"), list):
        return f"{INDEX}: not an index a run wrote: expected {shape}, observed {_shape(index)}"
    for position, entry in enumerate(index["files"]):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("sha256"), str)
        ):
            return (
                f"{INDEX}: not an index a run wrote: files[{position}] is {_shape(entry)}, "
                "expected an object with a `path` and a `sha256` string"
            )
    missing = index.get("missing_uris", [])
    if not isinstance(missing, list) or not all(isinstance(uri, str) for uri in missing):
        return f"{INDEX}: not an index a run wrote: `missing_uris` is {_shape(missing)}"
    return {**index, "missing_uris": missing}


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return "an object with " + (", ".join(f"`{key}`" for key in list(value)[:5]) or "no key")
    return f"{type(value).__name__} {json.dumps(value)[:40]}"
