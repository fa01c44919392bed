"""Loads the bundled JSON Schemas once and hands out compiled validators by short name."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from .errors import ConfigurationError

_PACKAGE = "rl_conformance.schemas"


@cache
def _documents() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for entry in resources.files(_PACKAGE).iterdir():
        if entry.name.endswith(".json"):
            found[entry.name.removesuffix(".json")] = json.loads(entry.read_text(encoding="utf-8"))
    return found


def schema_names() -> list[str]:
    return sorted(_documents())


@cache
def _registry() -> Registry:
    resources_by_id = [
        (document["$id"], Resource.from_contents(document))
        for document in _documents().values()
        if "$id" in document
    ]
    return Registry().with_resources(resources_by_id)


def schema(name: str) -> dict[str, Any]:
    try:
        return _documents()[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown schema {name!r}; expected one of: {', '.join(schema_names())}"
        ) from None


@cache
def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schema(name), registry=_registry())
