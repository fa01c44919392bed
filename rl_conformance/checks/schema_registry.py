"""Loads the bundled JSON Schemas once and hands out compiled validators by short name.

Two engines validate against the same documents. The reference is Python `jsonschema` (draft
2020-12, formats as annotations): its errors are the violations the checks report. When
`jsonschema_rs` is importable, `is_valid` asks it first, because a large body (a 10,000-worker
discovery reply) validates two orders of magnitude faster there; only an instance it rejects
goes to the reference for the errors. So a verdict never rests on the fast engine alone: it may
only ever be stricter than the reference, which then decides. Where the two engines differ, the
fast engine's copy of a schema is adjusted toward the reference (see `_rust_schema`), and what
it cannot express makes it reject (non-finite numbers where they matter: `_FINITE`), or not be
used at all. `tests/test_schema_engines.py` holds them to agreement on every recorded fixture
and schema example, and on mutations of them.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from typing import Any
from urllib.parse import urljoin

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from ..data_dirs import data_dir
from ..errors import ConfigurationError

try:
    import jsonschema_rs
except ImportError:  # pragma: no cover - exercised by the fallback test with the import blocked
    jsonschema_rs = None  # type: ignore[assignment]

_DRAFT = "https://json-schema.org/draft/2020-12/schema"
_FINITE_ID = "https://dynamo-rl-conformance.dev/schemas/_finite-json.json"
_FINITE = {
    "$schema": _DRAFT,
    "$id": _FINITE_ID,
    "description": "Any JSON value whose numbers are all finite. The fast engine types a NaN or "
    "an infinity as nothing at all (so it fails every `type` and skips `minimum`), where the "
    "reference treats it as a number; requiring finiteness makes the fast engine reject such an "
    "instance and leaves the verdict to the reference.",
    "type": ["object", "array", "string", "number", "boolean", "null"],
    "items": {"$ref": "#"},
    "additionalProperties": {"$ref": "#"},
}


@cache
def _documents() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for entry in sorted(data_dir("schemas").glob("*.json")):
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
    """The reference validator: its errors are what a schema check reports."""
    return Draft202012Validator(schema(name), registry=_registry())


def is_valid(name: str, instance: Any) -> bool:
    """Whether `instance` conforms to `schemas/<name>.json`, as the reference validator says.

    The fast engine answers when it accepts; an instance it rejects or cannot take (a string
    with a lone surrogate, a non-string key) is judged by the reference. Instances are JSON
    values as `json.loads` builds them (a tuple is not one: the fast engine reads it as an
    array, the reference as no JSON type)."""
    return fast_accepts(name, instance) or validator(name).is_valid(instance)


def fast_accepts(name: str, instance: Any) -> bool:
    """Whether the fast engine accepts `instance` (so the reference would); False when it
    rejects it, cannot take it, or is not there: then only the reference can tell."""
    fast = fast_validator(name)
    if fast is None:
        return False
    try:
        return bool(fast.is_valid(instance))
    except (ValueError, TypeError, OverflowError):
        return False  # a lone surrogate, a non-string key...: the reference judges it


@cache
def fast_validator(name: str) -> Any | None:
    """The `jsonschema_rs` validator for `name`, or None: not installed, a version that types
    non-finite numbers (`engine_fits`), or a schema with a regular expression whose meaning the
    fast engine cannot be given."""
    if jsonschema_rs is None or not engine_fits():
        return None
    documents = _documents()
    if "$id" not in schema(name):
        return None
    try:
        translated = [(doc["$id"], _rust_schema(doc)) for doc in documents.values() if "$id" in doc]
    except _Untranslatable:
        return None
    target = schema(name)["$id"]
    checked = [{"$ref": target}]
    if not _Finiteness(documents).harmless(schema(name), target):
        checked.append({"$ref": _FINITE_ID})
    try:
        registry = jsonschema_rs.Registry([*translated, (_FINITE_ID, _FINITE)])
        return jsonschema_rs.Draft202012Validator(
            {"$schema": _DRAFT, "allOf": checked}, registry=registry, validate_formats=False
        )
    except Exception:  # a schema the fast engine refuses is checked by the reference alone
        return None


@cache
def engine_fits() -> bool:
    """Whether the installed `jsonschema_rs` gives a NaN or an infinity no JSON type, as
    `_FINITE` and `_Finiteness` assume (0.61 does; 0.35 reads a NaN as null, and is not used)."""
    if jsonschema_rs is None:
        return False
    probe = jsonschema_rs.Draft202012Validator(_FINITE)
    return not any(probe.is_valid(value) for value in (math.nan, math.inf, -math.inf))


# --- Where a non-finite number cannot make the fast engine the more lenient -----------------
#
# The fast engine gives a NaN or an infinity no JSON type: it fails every `type`, `const` and
# `enum`, and skips every keyword of a type (`minimum`, ...); the reference reads it as a number.
# So the fast engine can only accept what the reference rejects where a numeric keyword has no
# `type` beside it, or under `not`, `oneOf` or `if` (where being stricter flips the outcome),
# or in `uniqueItems` of untyped items. A schema with none of these needs no `_FINITE` walk.

_NUMERIC = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
_ONE_SCHEMA = frozenset({"items", "additionalProperties", "contains", "propertyNames"})
_SCHEMA_LISTS = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
_UNSURE = frozenset({"minContains", "maxContains", "unevaluatedItems", "unevaluatedProperties"})
_APPLICATORS = (
    _ONE_SCHEMA
    | _SCHEMA_LISTS
    | {"properties", "patternProperties", "dependentSchemas"}
    | {"not", "if", "then", "else", "$ref", "$dynamicRef"}
)


class _Finiteness:
    """Decides, from the schema documents alone, where the fast engine is at least as strict as
    the reference on instances holding non-finite numbers (`harmless`) or gives the same answer
    (`indifferent`)."""

    def __init__(self, documents: dict[str, dict[str, Any]]) -> None:
        self.by_id = {doc["$id"]: doc for doc in documents.values() if "$id" in doc}
        self.open: set[tuple[str, int, str]] = set()

    def harmless(self, node: Any, base: str) -> bool:
        return self._judge(node, base, "harmless")

    def indifferent(self, node: Any, base: str) -> bool:
        return self._judge(node, base, "indifferent")

    def _judge(self, node: Any, base: str, question: str) -> bool:
        if not isinstance(node, dict):
            return True  # a boolean schema reads every value alike in both engines
        key = (base, id(node), question)
        if key in self.open:
            return True  # a recursive reference: by induction on the instance's depth
        self.open.add(key)
        try:
            return self._keywords(node, base, question)
        finally:
            self.open.discard(key)

    def _keywords(self, node: dict[str, Any], base: str, question: str) -> bool:
        strict = question == "harmless"
        for key, value in node.items():
            if key in _UNSURE or (not strict and (key == "type" or key in _NUMERIC)):
                return False
            if key in _NUMERIC and "type" not in node:
                return False
            if key == "uniqueItems" and value is True and not _typed_items(node):
                return False
            if key not in _APPLICATORS:
                continue
            # Under not / oneOf / if, a stricter subschema can flip the outcome: ask for the
            # same answer there.
            inner = "indifferent" if key in ("not", "oneOf", "if") else question
            if key in ("$ref", "$dynamicRef"):
                found = self._resolve(str(value), base)
                if found is None or not self._judge(found[0], found[1], inner):
                    return False
            elif key in _SCHEMA_LISTS:
                if not all(self._judge(item, base, inner) for item in value):
                    return False
            elif key in ("properties", "patternProperties", "dependentSchemas"):
                if not all(self._judge(item, base, inner) for item in value.values()):
                    return False
            elif not self._judge(value, base, inner):
                return False
        return True

    def _resolve(self, reference: str, base: str) -> tuple[Any, str] | None:
        uri, _, pointer = urljoin(base, reference).partition("#")
        node: Any = self.by_id.get(uri)
        for step in filter(None, pointer.split("/")):
            step = step.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and step in node:
                node = node[step]
            elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
                node = node[int(step)]
            else:
                return None
        return (node, uri) if node is not None else None


def _typed_items(node: dict[str, Any]) -> bool:
    items = node.get("items")
    return "prefixItems" not in node and isinstance(items, dict) and "type" in items


# --- Giving the fast engine the reference's regular expressions ------------------------------
#
# The reference runs `pattern` with Python's `re` (search, no flags); the fast engine with
# ECMA-262 semantics. They differ on `$` (Python also matches before a final newline) and on
# `\s` / `\S` (Python's whitespace is `str.isspace`, which adds U+001C-U+001F and U+0085 to
# ECMA's and lacks U+FEFF). Those are rewritten; any other construct whose meaning differs
# (`.`, `\d`, `\w`, `\b`, flags, nested classes...) makes the schema Python-only.


class _Untranslatable(ValueError):
    pass


_PYTHON_SPACE = "".join(chr(code) for code in range(0x3001) if chr(code).isspace())
"""Python's `\\s` for str patterns (no whitespace character lies above U+3000)."""
_SAME_ESCAPES = frozenset("ntrfv") | frozenset("\\/.-^$*+?()[]{}|")
_SAME_GROUP = re.compile(r"\?(?:[:=!]|<[=!])")
"""Groups both engines read alike: non-capturing, lookahead, lookbehind."""
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_DATA = frozenset({"const", "enum", "default", "examples"})


def _rust_schema(node: Any, key: str | None = None) -> Any:
    """A copy of a schema document whose regular expressions mean for the fast engine what they
    mean for the reference."""
    if isinstance(node, list):
        return [_rust_schema(item, key) for item in node]
    if not isinstance(node, dict):
        return node
    copied: dict[str, Any] = {}
    for name, value in node.items():
        if key in _SCHEMA_MAPS:
            copied[name] = _rust_schema(value)
        elif name in _DATA or name.startswith("x-") or name == "description":
            copied[name] = value
        elif name == "pattern" and isinstance(value, str):
            copied[name] = rust_pattern(value)
        elif name == "patternProperties" and isinstance(value, dict):
            copied[name] = {rust_pattern(p): _rust_schema(sub) for p, sub in value.items()}
        else:
            copied[name] = _rust_schema(value, name)
    return copied


def rust_pattern(pattern: str) -> str:
    """`pattern` rewritten so that ECMA-262 matching gives Python's `re.search` result."""
    out: list[str] = []
    in_class = False
    position = 0
    while position < len(pattern):
        char = pattern[position]
        if char == "\\":
            if position + 1 >= len(pattern):
                raise _Untranslatable(pattern)
            escaped = pattern[position + 1]
            position += 2
            if escaped == "s":
                out.append(_PYTHON_SPACE if in_class else f"[{_PYTHON_SPACE}]")
            elif escaped == "S" and not in_class:
                out.append(f"[^{_PYTHON_SPACE}]")
            elif escaped == "Z" and not in_class:
                out.append("\\z")
            elif escaped in _SAME_ESCAPES:
                out.append("\\" + escaped)
            else:
                raise _Untranslatable(pattern)
            continue
        position += 1
        if in_class:
            if char == "[":
                raise _Untranslatable(pattern)
            if char == "]":
                in_class = False
            out.append(char)
        elif char == "[":
            if pattern.startswith("]", position) or pattern.startswith("^]", position):
                raise _Untranslatable(pattern)
            in_class = True
            out.append(char)
        elif char == "$":
            out.append("(?=\\n?\\z)")
        elif char == "." or (
            char == "("
            and pattern.startswith("?", position)
            and not _SAME_GROUP.match(pattern, position)
        ):
            raise _Untranslatable(pattern)
        else:
            out.append(char)
    if in_class:
        raise _Untranslatable(pattern)
    return "".join(out)
