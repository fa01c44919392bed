"""Dynamo's request trace (`dynamo.request.trace.v1`) read from the files its `file` sink writes.

Two row shapes exist: upstream's documentation and join fixtures show bare rows
(`{"schema": ..., "event_type": ...}`), while the 1.6.1 frontend's `jsonl` file sink wraps each
row as `{"timestamp": ..., "event": {...}}` (measured; `fixtures/KNOWN_DIFFERENCES.md`). Both
are read. A trace is read while the frontend still writes it, so a last line without its newline
is left for the next read, and `.jsonl.gz` segments that do not decompress to the end yet are
read as far as they go.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "dynamo.request.trace.v1"
PAYLOAD = "request_payload"
END = "request_end"


def unwrap(document: Any) -> dict[str, Any] | None:
    """The trace row a parsed line holds, in either shape; None for anything else."""
    if not isinstance(document, dict):
        return None
    if document.get("schema") == SCHEMA:
        return document
    event = document.get("event")
    if isinstance(event, dict) and event.get("schema") == SCHEMA:
        return event
    return None


@dataclass
class TraceRows:
    """What has been read of a trace so far."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    unreadable: int = 0
    """Complete lines that were not JSON or not a `dynamo.request.trace.v1` row."""
    files: int = 0


def _segments(path: Path) -> list[Path]:
    """A file; every `*.jsonl*` file of a directory; else the `jsonl_gz` segments of a prefix."""
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and ".jsonl" in p.name)
    parent = path.parent if path.parent.is_dir() else None
    if parent is None:
        return []
    return sorted(p for p in parent.iterdir() if p.is_file() and p.name.startswith(path.name))


class TraceReader:
    """Reads a trace as it grows: plain files from where the last read stopped, gzip segments
    whole each time (they are rolled, so a finished segment never changes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offsets: dict[Path, int] = {}
        self._gz_lines: dict[Path, int] = {}
        self.seen = TraceRows()

    def read(self) -> TraceRows:
        files = _segments(self.path)
        self.seen.files = len(files)
        for segment in files:
            if segment.name.endswith(".gz"):
                self._read_gzip(segment)
            else:
                self._read_plain(segment)
        return self.seen

    def _take(self, lines: Iterator[bytes]) -> None:
        for line in lines:
            if not line.strip():
                continue
            try:
                row = unwrap(json.loads(line))
            except ValueError:
                row = None
            if row is None:
                self.seen.unreadable += 1
            else:
                self.seen.rows.append(row)

    def _read_plain(self, segment: Path) -> None:
        offset = self._offsets.get(segment, 0)
        try:
            with segment.open("rb") as source:
                source.seek(offset)
                data = source.read()
        except OSError:
            return
        complete = data.rfind(b"\n") + 1
        self._offsets[segment] = offset + complete
        self._take(iter(data[:complete].split(b"\n")))

    def _read_gzip(self, segment: Path) -> None:
        try:
            raw = segment.read_bytes()
        except OSError:
            return
        try:
            data = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            data = zlib.decompressobj(wbits=31).decompress(raw)
        lines = data[: data.rfind(b"\n") + 1].split(b"\n")
        already = self._gz_lines.get(segment, 0)
        self._gz_lines[segment] = len(lines)
        self._take(iter(lines[already:]))


def payload_headers(row: dict[str, Any]) -> dict[str, str]:
    """A `request_payload` row's captured headers, names lower-cased (capture matches
    case-insensitively; upstream's fixtures show both cases)."""
    payload = row.get("payload")
    headers = payload.get("http_request_headers") if isinstance(payload, dict) else None
    if not isinstance(headers, dict):
        return {}
    return {str(name).lower(): value for name, value in headers.items() if isinstance(value, str)}


def request_id(row: dict[str, Any]) -> str | None:
    """The Dynamo request id of a payload row (`payload.request_id`) or an end row
    (`request.request_id`)."""
    holder = row.get("payload") if row.get("event_type") == PAYLOAD else row.get("request")
    value = holder.get("request_id") if isinstance(holder, dict) else None
    return value if isinstance(value, str) and value else None
