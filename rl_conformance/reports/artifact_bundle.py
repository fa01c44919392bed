"""The run's evidence as Dynamo's own artifact bundle, `dynamo.rl.artifact-bundle.v1`
(`artifact-bundle.json`, written with `--artifact-bundle`), held to the rules of upstream's
`docs/fern/scripts/rl_artifact_bundle.py` (the shapes followed are recorded in
`fixtures/upstream/rl-artifact-bundle.json`).

The index names each record (its schema, canonical `artifact://bundle/<path>` URI, sha256, size
and whether it meets its publication gate) and closes every artifact URI the records name
(`artifact`, `checker_output_artifact`, `uri`, `artifacts`) against a regular file below the
report directory: a URI that is not canonical, climbs out (`..`), carries a query, or names a
file that is not there is refused with one sentence. It proves the files exist and are
unchanged, not that they are true.

Where this differs from upstream: a run writes only `dynamo.rl.validation.v1` records, so the
program-evidence and clean-room records upstream's publication bundle requires are listed as
findings, and so is each record's publication gate (a deployment run's record never meets it);
`closure_status` is upstream's (`complete` only without any finding). Checking a bundle
(`check-artifact-bundle`) holds it to upstream's closure rules; `--publication-gate` also to
`closure_status: complete`, as upstream's `verify` does."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ..redaction import write_text
from .record_rules import publication_findings as validation_publication_findings
from .validation import VALIDATION_DIR

SCHEMA = "dynamo.rl.artifact-bundle.v1"
INDEX = "artifact-bundle.json"
VALIDATION = "dynamo.rl.validation.v1"
REQUIRED_SCHEMAS = (
    VALIDATION,
    "dynamo.rl.program-evidence.v1",
    "dynamo.rl.clean-room-review.v1",
)
"""The three records upstream's publication bundle holds (`RECORD_SCHEMAS`)."""
REFERENCE_KEYS = ("artifact", "checker_output_artifact", "uri")


class BundleRefused(ValueError):
    """A path, URI or index the upstream rules refuse; the message is one sentence."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def uri_for(relative: str) -> str:
    """The canonical URI of a path below the root (upstream `_uri_for_path`)."""
    return f"artifact://bundle/{quote(relative, safe='/._-')}"


def path_for(uri: str) -> str | None:
    """The relative path an `artifact://bundle/` URI names; None for another scheme or
    authority (an external URI). Refused: a query or fragment, not one absolute path, an empty,
    `.` or `..` segment, a URI that is not the canonical spelling of its path."""
    parts = urlsplit(uri)
    if parts.scheme != "artifact" or parts.netloc != "bundle":
        return None
    if parts.query or parts.fragment:
        raise BundleRefused(f"{uri}: a bundle URI must not carry a query or fragment")
    decoded = unquote(parts.path)
    if not decoded.startswith("/") or decoded.startswith("//"):
        raise BundleRefused(f"{uri}: a bundle URI must hold one absolute path")
    relative = PurePosixPath(decoded[1:])
    if not relative.parts or any(part in ("", ".", "..") for part in relative.parts):
        raise BundleRefused(
            f"{uri}: a bundle URI must name a path inside the bundle, without '.' or '..'"
        )
    if uri != uri_for(relative.as_posix()):
        raise BundleRefused(
            f"{uri}: not the canonical URI of its path (expected {uri_for(relative.as_posix())})"
        )
    return relative.as_posix()


def member(root: Path, relative: str, what: str) -> Path:
    """The regular file `relative` names below `root`, reached through no symbolic link."""
    if ".." in PurePosixPath(relative).parts or PurePosixPath(relative).is_absolute():
        raise BundleRefused(f"{what} {relative}: a path inside the bundle, without '..'")
    cursor = root
    for part in PurePosixPath(relative).parts:
        cursor = cursor / part
        if cursor.is_symlink():
            raise BundleRefused(f"{what} {relative}: reached through a symbolic link (refused)")
    if not cursor.is_file():
        raise BundleRefused(f"{what} {relative}: no such file in the bundle")
    return cursor


def references(value: Any) -> set[str]:
    """Every artifact reference a record holds (upstream `_artifact_references`)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, child in value.items():
            if key in REFERENCE_KEYS:
                if isinstance(child, str) and child:
                    found.add(child)
            elif key == "artifacts" and isinstance(child, list):
                found.update(item for item in child if isinstance(item, str) and item)
            else:
                found |= references(child)
    elif isinstance(value, list):
        for child in value:
            found |= references(child)
    return found


def record_paths(root: Path) -> list[str]:
    """The run's records: every `validation/*.json` holding a `dynamo.rl.validation.v1`."""
    found = []
    for path in sorted((root / VALIDATION_DIR).glob("*.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(document, dict) and document.get("schema") == VALIDATION:
            found.append(path.relative_to(root).as_posix())
    return found


def _record_entry(root: Path, relative: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    path = member(root, relative, "record")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BundleRefused(f"record {relative}: not JSON ({exc})") from None
    schema = record.get("schema") if isinstance(record, dict) else None
    if not isinstance(schema, str) or not schema:
        raise BundleRefused(f"record {relative}: expected an object with a `schema` string")
    gate = (
        validation_publication_findings(record)
        if schema == VALIDATION
        else [f"unsupported record schema {schema}"]
    )
    entry = {
        "schema": schema,
        "uri": uri_for(relative),
        "path": relative,
        "sha256": sha256_of(path),
        "size_bytes": path.stat().st_size,
        "publication_gate_passed": not gate,
        "publication_finding_count": len(gate),
    }
    return entry, record, gate


def build_index(root: Path, records: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """The index of `records` (paths below `root`) and its findings (upstream `build_index`)."""
    paths = list(records)
    if not paths:
        raise BundleRefused("no dynamo.rl.validation.v1 record to index under validation/")
    entries, findings, referenced = [], [], set()
    for relative in paths:
        entry, record, gate = _record_entry(root, relative)
        entries.append(entry)
        referenced |= references(record)
        findings += [f"{relative} publication gate: {finding}" for finding in gate]
    entries.sort(key=lambda item: item["path"])
    schemas = [entry["schema"] for entry in entries]
    missing_schemas = sorted(set(REQUIRED_SCHEMAS) - set(schemas))
    if missing_schemas:
        findings.append("missing required record schemas: " + ", ".join(missing_schemas))
    findings += [
        f"record schema appears more than once: {s}"
        for s in sorted(set(schemas))
        if schemas.count(s) > 1
    ]
    artifacts, missing, external = [], [], []
    for uri in sorted(referenced):
        relative = path_for(uri)
        if relative is None:
            external.append(uri)
            continue
        try:
            path = member(root, relative, f"artifact {uri}")
        except BundleRefused:
            missing.append(uri)
            continue
        artifacts.append(
            {
                "uri": uri,
                "path": relative,
                "sha256": sha256_of(path),
                "size_bytes": path.stat().st_size,
            }
        )
    if not referenced:
        findings.append("records do not reference any artifact URIs")
    if missing:
        findings.append("missing local artifacts: " + ", ".join(missing))
    if external:
        findings.append(
            "external artifact URIs are not closed by this bundle: " + ", ".join(external)
        )
    index = {
        "schema": SCHEMA,
        "closure_status": "complete" if not findings else "incomplete",
        "artifact_root": ".",
        "records": entries,
        "artifacts": artifacts,
        "referenced_uri_count": len(referenced),
        "missing_uris": missing,
        "external_uris": external,
        "finding_count": len(findings),
        "findings": findings,
    }
    return index, findings


def write_artifact_bundle(root: Path) -> str:
    """Write `artifact-bundle.json` over the run's records; its sha256."""
    index, _ = build_index(root, record_paths(root))
    text = json.dumps(index, indent=2, sort_keys=True) + "\n"
    write_text(root / INDEX, text)
    return hashlib.sha256(text.encode()).hexdigest()


def verify(root: Path, expected_sha256: str | None, *, publication: bool = False) -> list[str]:
    """What differs between the directory and its `artifact-bundle.json` (upstream `verify`):
    the index against the anchored digest, its shape, then the index rebuilt from its records
    against it, record by record and artifact by artifact. A refused URI or path raises
    `BundleRefused` (one sentence). `publication`: also upstream's demand of a complete closure
    with no finding."""
    path = member(root, INDEX, "index")
    if expected_sha256 is not None and sha256_of(path) != expected_sha256.lower():
        return [f"{INDEX}: its sha256 is {sha256_of(path)}, not the anchored {expected_sha256}"]
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BundleRefused(f"{INDEX}: not JSON ({exc}), so not an artifact bundle") from None
    findings = _shape_findings(index, publication)
    if findings:
        return findings
    indexed = {entry.get("path"): entry for entry in index["records"] if isinstance(entry, dict)}
    if len(indexed) != len(index["records"]) or not all(isinstance(p, str) for p in indexed):
        return [f"{INDEX}: records must be objects with unique `path` strings"]
    rebuilt, _ = build_index(root, [str(p) for p in indexed])
    listed = {e.get("uri"): e for e in index["artifacts"] if isinstance(e, dict)}
    fresh = {entry["uri"]: entry for entry in rebuilt["artifacts"]}
    if rebuilt["missing_uris"]:  # the one thing to say: a file the records name is gone
        return ["missing local artifacts: " + ", ".join(rebuilt["missing_uris"])]
    if set(fresh) != set(listed):
        findings.append(f"{INDEX}: the artifact URIs listed are not those the records name")
    for entry in rebuilt["records"]:
        for field in ("schema", "uri", "sha256", "size_bytes", "publication_gate_passed"):
            if indexed[entry["path"]].get(field) != entry[field]:
                findings.append(f"record {entry['path']}: {field} differs from the index")
    for uri in sorted(set(fresh) & set(listed)):
        for field in ("path", "sha256", "size_bytes"):
            if listed[uri].get(field) != fresh[uri][field]:
                findings.append(f"artifact {uri}: {field} differs from the index")
    return findings


def _shape_findings(index: Any, publication: bool) -> list[str]:
    if not isinstance(index, dict):
        return [f"{INDEX}: expected an object, observed {type(index).__name__}"]
    findings = []
    if index.get("schema") != SCHEMA:
        findings.append(f"{INDEX}: schema: expected {SCHEMA}, observed {index.get('schema')!r}")
    if index.get("artifact_root") != ".":
        findings.append(
            f"{INDEX}: artifact_root: expected '.', observed {index.get('artifact_root')!r}"
        )
    for name in ("records", "artifacts", "missing_uris", "external_uris"):
        if not isinstance(index.get(name), list):
            findings.append(f"{INDEX}: {name}: expected a list")
    for name in ("referenced_uri_count", "finding_count"):
        value = index.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            findings.append(f"{INDEX}: {name}: expected a nonnegative integer, observed {value!r}")
    if findings:
        return findings
    if index["missing_uris"]:
        findings.append(f"{INDEX}: missing_uris must be empty: {', '.join(index['missing_uris'])}")
    if publication and index.get("closure_status") != "complete":
        findings.append(
            f"{INDEX}: closure_status: expected complete, observed {index.get('closure_status')!r}"
        )
    if publication and index["finding_count"]:
        findings.append(f"{INDEX}: finding_count: expected 0, observed {index['finding_count']}")
    return findings
