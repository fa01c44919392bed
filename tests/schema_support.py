"""The JSON Schemas of ``schemas/`` as the schema tests load them: every schema file, a registry
that resolves their cross-file ``$ref``s, a validator per example target, the valid examples of
``tests/schema_examples/<target>/``, and a walk over a JSON document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"
EXAMPLE_DIR = Path(__file__).resolve().parent / "schema_examples"
BASE_URI = "https://dynamo-rl-conformance.dev/schemas/"

#: Example-directory name -> schema URI (relative to BASE_URI) it validates against.
TARGETS: dict[str, str] = {
    "discovery-v1": "discovery-v1.json",
    "discovery-error": "discovery-error.json",
    "nvext.request": "nvext.json#/$defs/request",
    "nvext.response": "nvext.json#/$defs/response",
    "nvext.prompt_logprobs": "nvext.json#/$defs/prompt_logprobs",
    "nvext.metadata_upload_v1_7": "nvext.json#/$defs/metadata_upload_v1_7",
    "nvext.generation_artifact_request": "nvext.json#/$defs/generation_artifact_request",
    "nvext.generation_artifact_result": "nvext.json#/$defs/generation_artifact_result",
    "completion": "completion.json",
    "completion-chunk": "completion-chunk.json",
    "chat-completion": "chat-completion.json",
    "chat-completion-chunk": "chat-completion-chunk.json",
    "sglang-generate": "sglang-generate.json",
    "sglang-generate-chunk": "sglang-generate-chunk.json",
    "error": "error.json",
    "error.stream_error": "error.json#/$defs/stream_error",
    "admin-reply.vllm": "admin-reply.json#/$defs/vllm",
    "admin-reply.sglang": "admin-reply.json#/$defs/sglang",
    "admin-reply.dispatch_error": "admin-reply.json#/$defs/dispatch_error",
    "admin-reply.route_not_found": "admin-reply.json#/$defs/route_not_found",
    "admin-reply.invalid_json": "admin-reply.json#/$defs/invalid_json",
    "matrix": "matrix.json",
    "docker-deployment": "docker-deployment.json",
    "rl-validation-record": "rl-validation-record.json",
}


@cache
def schemas() -> dict[str, dict[str, Any]]:
    """Every schema file, keyed by file name."""
    return {p.name: json.loads(p.read_text()) for p in sorted(SCHEMA_DIR.glob("*.json"))}


@cache
def registry() -> Registry:
    """A registry holding every schema under its ``$id``: cross-file ``$ref``s resolve here."""
    return Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in schemas().values()
    )


@cache
def validator(target: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": BASE_URI + TARGETS[target]}, registry=registry())


def example(target: str, name: str) -> Any:
    return json.loads((EXAMPLE_DIR / target / f"{name}.json").read_text())


def example_files() -> list[Path]:
    return sorted(EXAMPLE_DIR.glob("*/*.json"))


def walk(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Yield (path, node) for every node of a JSON document."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, (*path, index))


def flat_errors(errors: Iterator[ValidationError]) -> list[ValidationError]:
    """All errors including those nested in anyOf/oneOf contexts."""
    out: list[ValidationError] = []
    for error in errors:
        out.append(error)
        out.extend(flat_errors(iter(error.context)))
    return out
