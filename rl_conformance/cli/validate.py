"""`rl-conformance validate SCHEMA FILE`: a captured JSON body, or every event of an SSE
transcript, against one of the schemas in `schemas/`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..checks import schema_check
from ..checks.schema_registry import schema_names
from ..errors import ConfigurationError
from ..wire.exchange import BodyNotJSON, parse_json
from ..wire.sse import SSEDecodeError, SSEParser

EXIT_OK, EXIT_FAILED = 0, 1


def register(commands: Any) -> None:
    parser = commands.add_parser("validate", help="validate a captured body or SSE transcript")
    parser.add_argument("schema", help=f"one of: {', '.join(schema_names())}")
    parser.add_argument(
        "file", type=Path, help="a captured JSON body, or an SSE transcript (data: lines)"
    )
    parser.set_defaults(handler=handle)


def load_instances(path: Path) -> list[tuple[str, Any]]:
    """A JSON document, or every JSON data event of an SSE transcript (`[DONE]` skipped)."""
    raw = path.read_bytes()
    text = raw.lstrip()
    if text.startswith(b"data:") or b"\ndata:" in raw[:4096]:
        parser = SSEParser()
        events = parser.feed(raw) + parser.close()
        instances = []
        for position, event in enumerate(events):
            if event.data == "[DONE]":
                continue
            instances.append(
                (f"event {position}", parse_json(event.data.encode(), what=f"event {position}"))
            )
        if parser.truncated:
            raise ConfigurationError(f"{path}: transcript ends in the middle of an event")
        return instances
    return [("body", parse_json(raw, what=str(path)))]


def handle(args: argparse.Namespace) -> int:
    if args.schema not in schema_names():
        raise ConfigurationError(
            f"unknown schema {args.schema!r}; expected one of: {', '.join(schema_names())}"
        )
    try:
        instances = load_instances(args.file)
    except OSError as exc:
        raise ConfigurationError(f"cannot read {args.file}: {exc.strerror}") from exc
    except (BodyNotJSON, SSEDecodeError) as exc:
        print(f"{args.file}: {exc}")
        return EXIT_FAILED
    failures = 0
    for label, instance in instances:
        result = schema_check(args.schema, instance)
        if result.passed:
            continue
        failures += 1
        print(f"{args.file} ({label}): does not conform to {args.schema}")
        for violation in result.violations:
            print(
                f"  {violation.message}\n    expected {violation.expected}; "
                f"observed {json.dumps(violation.observed)[:200]}"
            )
    if failures == 0:
        print(f"{args.file}: {len(instances)} document(s) conform to {args.schema}")
    return EXIT_FAILED if failures else EXIT_OK
