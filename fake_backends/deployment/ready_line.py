"""The one JSON line a fake deployment prints on stdout once every server listens.

Harnesses that start ``python -m fake_backends`` as a subprocess read exactly one line
and get every URL they need; nothing else is ever written to stdout.
"""

from __future__ import annotations

import json
import select
import time
from collections.abc import Mapping
from typing import IO, Any

READY_FIELDS = ("backend", "frontend", "rl", "control", "model", "workers", "faults", "pid")


def ready_line(info: Mapping[str, Any]) -> str:
    """Render the ready information as one compact JSON line (no trailing newline)."""
    return json.dumps({key: info[key] for key in READY_FIELDS}, separators=(",", ":"))


def parse_ready_line(line: str) -> dict[str, Any]:
    info = json.loads(line)
    if not isinstance(info, dict) or any(key not in info for key in READY_FIELDS):
        raise ValueError(f"not a fake_backends ready line: {line!r}")
    return info


def read_ready_line(stream: IO[bytes], timeout: float = 20.0) -> dict[str, Any]:
    """Read the ready line from a subprocess's stdout pipe, giving up after ``timeout``."""
    deadline = time.monotonic() + timeout
    buffer = b""
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no ready line before the deadline")
        readable, _, _ = select.select([stream], [], [], remaining)
        if not readable:
            continue
        chunk = stream.read1(4096) if hasattr(stream, "read1") else stream.read(1)
        if not chunk:
            raise EOFError(f"process closed stdout before the ready line: {buffer!r}")
        buffer += chunk
    return parse_ready_line(buffer.split(b"\n", 1)[0].decode("utf-8"))
