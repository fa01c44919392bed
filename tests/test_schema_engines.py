"""The fast schema engine (`jsonschema_rs`) never decides otherwise than the reference
(`jsonschema`): on every recorded Dynamo body and stream event a schema applies to, on every
schema example, and on mutations of them. It may reject what the reference accepts only where
it is told to (non-finite numbers), since the reference then decides."""

from __future__ import annotations

import copy
import json
import math
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from checks.bodies import json_paths as paths
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from rl_conformance.checks import schema_check, schema_registry

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    not schema_registry.engine_fits(), reason="jsonschema_rs is not installed, or not usable"
)

BY_PATH = {
    "/v1/completions": ("completion", "completion-chunk"),
    "/v1/chat/completions": ("chat-completion", "chat-completion-chunk"),
    "/generate": ("sglang-generate", "sglang-generate-chunk"),
}


@cache
def documents() -> tuple[tuple[str, str, Any], ...]:
    """(label, schema name, instance) for every recorded fixture body or stream event a schema
    applies to, and every whole-file schema example."""
    found: list[tuple[str, str, Any]] = []
    for path in sorted((ROOT / "fixtures").rglob("*.json")):
        fixture = json.loads(path.read_text())
        if not isinstance(fixture, dict) or not {"request", "response"} <= set(fixture):
            continue
        request, response = fixture["request"], fixture["response"]
        label = f"{path.parent.name}/{path.stem}"
        body, events = response.get("body"), response.get("sse_events") or []
        if response.get("status", 0) >= 400:
            if isinstance(body, dict):
                found.append((label, "error", body))
            continue
        if request.get("target") == "rl" and request.get("url_path") == "/v1/rl/workers":
            found.append((label, "discovery-v1", body))
            continue
        body_schema, event_schema = BY_PATH.get(request.get("url_path", ""), (None, None))
        if body_schema is not None and body is not None:
            found.append((label, body_schema, body))
        for position, event in enumerate(events):
            if event_schema is not None and isinstance(event, dict):
                found.append((f"{label}#{position}", event_schema, event))
    for path in sorted((ROOT / "tests" / "schema_examples").glob("*/*.json")):
        if path.parent.name in schema_registry.schema_names():
            found.append((f"example {path.parent.name}/{path.stem}", path.parent.name, _load(path)))
    return tuple(found)


def _load(path: Path) -> Any:
    return json.loads(path.read_text())


def finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(item) for item in value.values())
    if isinstance(value, list):
        return all(finite(item) for item in value)
    return True


def assert_engines_agree(name: str, instance: Any) -> None:
    reference = schema_registry.validator(name).is_valid(instance)
    fast_engine = schema_registry.fast_validator(name)
    assert fast_engine is not None, name
    try:
        fast = fast_engine.is_valid(instance)
    except ValueError:
        fast = None  # the fast engine cannot take it: the reference decides
    if fast is not None:
        assert not (fast and not reference), "the fast engine accepted what the reference rejects"
        if finite(instance):
            assert fast == reference
    assert schema_registry.is_valid(name, instance) == reference


def test_every_schema_has_a_fast_validator() -> None:
    assert all(schema_registry.fast_validator(name) for name in schema_registry.schema_names())


def test_recorded_documents_were_found() -> None:
    assert len(documents()) > 100
    assert {name for _, name, _ in documents()} >= {"discovery-v1", "completion-chunk"}


def test_the_engines_agree_on_every_recorded_document() -> None:
    for label, name, instance in documents():
        try:
            assert_engines_agree(name, instance)
        except AssertionError as exc:
            raise AssertionError(f"{label} ({name}): {exc}") from exc


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "\n", "x\n", " ", "\x1c", "\x85", "\ufeff", "dyn://a.b.c", "http://h/"]),
    st.text(max_size=8),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def mutate(instance: Any, path: tuple[Any, ...], action: str, value: Any, text: str) -> Any:
    """One mutation at `path`: replace the node, drop it, add a member or element, or append
    text to a string (keeping most of the document valid, so that deep keywords are reached)."""
    root = copy.deepcopy(instance)
    if not path:
        return value if action == "replace" else root
    parent = root
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    node = parent[last]
    if action == "replace":
        parent[last] = value
    elif action == "drop":
        del parent[last]
    elif action == "suffix" and isinstance(node, str):
        parent[last] = node + text
    elif action == "grow" and isinstance(node, dict):
        node[text or "extra"] = value
    elif action == "grow" and isinstance(node, list):
        node.append(value if not node else copy.deepcopy(node[0]))
    return root


@settings(max_examples=120)
@given(
    pick=st.integers(min_value=0),
    where=st.integers(min_value=0),
    action=st.sampled_from(["replace", "drop", "suffix", "grow"]),
    value=VALUES,
    text=st.sampled_from(["", "\n", " ", "\x1c", "\x85", "\ufeff", "x", "0"]),
)
def test_the_engines_agree_on_mutated_documents(
    pick: int, where: int, action: str, value: Any, text: str
) -> None:
    _, name, instance = documents()[pick % len(documents())]
    candidates = paths(instance)
    mutated = mutate(instance, candidates[where % len(candidates)], action, value, text)
    assert_engines_agree(name, mutated)


def test_a_non_finite_number_anywhere_never_makes_the_fast_engine_the_more_lenient() -> None:
    """A NaN or an infinity has no JSON type for the fast engine; where that could make it
    accept what the reference rejects, the schema gets the `_FINITE` walk."""
    first = {name: instance for _, name, instance in reversed(documents())}
    for name, instance in first.items():
        for path in paths(instance):
            for value in (-math.inf, math.nan):
                assert_engines_agree(name, mutate(instance, path, "replace", value, ""))


LENIENT = [
    ({"minimum": 0}, -math.inf),
    ({"items": {"maximum": 0}}, [math.inf]),
    ({"not": {"type": "number"}}, math.nan),
    ({"if": {"type": "number"}, "then": {"const": 1}}, math.nan),
]


@pytest.mark.parametrize(("schema", "instance"), LENIENT)
def test_where_a_non_finite_number_would_pass_the_fast_engine_alone_the_schema_is_walked(
    schema: dict[str, Any], instance: Any
) -> None:
    fast = schema_registry.jsonschema_rs.Draft202012Validator(schema)
    assert fast.is_valid(instance) and not Draft202012Validator(schema).is_valid(instance)
    assert not schema_registry._Finiteness({}).harmless(schema, "urn:x")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "minimum": 0},
        {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
        {"if": {"required": ["error"]}, "then": {"properties": {"url": {"not": {}}}}},
        {"anyOf": [{"type": "integer", "maximum": 3}, {"type": "string"}]},
    ],
)
def test_typed_numeric_keywords_need_no_walk(schema: dict[str, Any]) -> None:
    assert schema_registry._Finiteness({}).harmless(schema, "urn:x")


@pytest.mark.parametrize(
    "pattern",
    [
        r"^dyn://",
        r"\S",
        r"^[0-9]+$",
        r"^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\s]+(/[^?#]*)?$",
        r"^a(?:b|c)\Z",
    ],
)
def test_rewritten_patterns_match_as_python_does(pattern: str) -> None:
    fast = schema_registry.jsonschema_rs.Draft202012Validator(
        {"pattern": schema_registry.rust_pattern(pattern)}
    )
    spaces = schema_registry._PYTHON_SPACE + "\ufeff\u200b"
    subjects = [
        "",
        "ab",
        "ac",
        "ac\n",
        "ac\n\n",
        "1",
        "12\n",
        "dyn://x",
        "http://h/p",
        "http://h\n",
    ]
    subjects += [f"http://h{space}x/" for space in spaces] + list(spaces)
    for subject in subjects:
        assert fast.is_valid(subject) == (re.search(pattern, subject) is not None), subject


@pytest.mark.parametrize("pattern", [r"^\d+$", r"a.b", r"(?i)abc", r"[\S]", r"\bword"])
def test_patterns_the_fast_engine_would_read_otherwise_are_refused(pattern: str) -> None:
    with pytest.raises(ValueError):
        schema_registry.rust_pattern(pattern)


def test_without_the_fast_engine_the_reference_alone_gives_the_same_violations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    label, name, instance = next(
        d for d in documents() if d[1] == "discovery-v1" and d[2]["workers"]
    )
    broken = mutate(instance, ("workers", 0, "instance_id"), "replace", -1, "")
    expected = schema_check(name, broken).violations
    assert expected, label
    monkeypatch.setattr(schema_registry, "jsonschema_rs", None)
    schema_registry.fast_validator.cache_clear()
    try:
        assert schema_registry.fast_validator(name) is None
        assert schema_check(name, broken).violations == expected
        assert schema_check(name, instance).passed
    finally:
        schema_registry.fast_validator.cache_clear()
