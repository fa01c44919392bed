"""The JSON Schemas in ``schemas/`` are valid, resolvable, documented, and their valid examples
validate.

Valid examples live in ``tests/schema_examples/<target>/*.json``; a target is a schema file
(``completion``) or one of its ``$defs`` (``nvext.request``). Each schema's invalid cases are in
``test_schema_invalid_cases``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from schema_support import (
    BASE_URI,
    EXAMPLE_DIR,
    TARGETS,
    example,
    example_files,
    registry,
    schemas,
    validator,
    walk,
)

#: The request nvext keys of Dynamo 1.6.1 (CONTRACT-NOTES §U3.1, serde field table).
NVEXT_REQUEST_KEYS = {
    "greed_sampling", "use_raw_prompt", "annotations", "backend_instance_id", "token_data",
    "max_thinking_tokens", "cache_salt", "extra_fields", "metadata_upload", "prefill_worker_id",
    "decode_worker_id", "dp_rank", "prefill_dp_rank", "agent_hints", "request_timestamp_ms",
    "routing_constraints", "router",
}  # fmt: skip


def test_schema_directory_holds_the_expected_files() -> None:
    expected = {target.split("#")[0] for target in TARGETS.values()}
    assert set(schemas()) == expected


@pytest.mark.parametrize("name", sorted(schemas()))
def test_schema_is_valid_draft_2020_12(name: str) -> None:
    Draft202012Validator.check_schema(schemas()[name])


@pytest.mark.parametrize("name", sorted(schemas()))
def test_schema_metadata(name: str) -> None:
    schema = schemas()[name]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == BASE_URI + name
    assert schema["title"].strip()
    assert schema["description"].strip()


@pytest.mark.parametrize("name", sorted(schemas()))
def test_every_property_and_definition_has_a_description(name: str) -> None:
    missing = []
    for path, node in walk(schemas()[name]):
        for container in ("properties", "$defs"):
            members = node.get(container) if isinstance(node, dict) else None
            for key, subschema in (members or {}).items():
                if not (isinstance(subschema, dict) and subschema.get("description", "").strip()):
                    missing.append("/".join(map(str, (*path, container, key))))
    assert not missing, f"without description: {missing}"


@pytest.mark.parametrize("name", sorted(schemas()))
def test_every_ref_resolves_through_the_registry(name: str) -> None:
    schema = schemas()[name]
    resolver = registry().resolver(base_uri=schema["$id"])
    refs = [node["$ref"] for _, node in walk(schema) if isinstance(node, dict) and "$ref" in node]
    for ref in refs:
        assert ref.startswith(("#", BASE_URI)), f"cross-file $ref must use the $id URL: {ref}"
        resolved = resolver.lookup(ref).contents
        assert isinstance(resolved, dict | bool), ref


def test_cross_file_refs_are_actually_used() -> None:
    """The registry test above is only meaningful if some $ref crosses files."""
    crossing = {
        name
        for name, schema in schemas().items()
        for _, node in walk(schema)
        if isinstance(node, dict) and str(node.get("$ref", "")).startswith(BASE_URI)
    }
    assert {"completion.json", "chat-completion.json", "sglang-generate.json"} <= crossing


def test_nvext_request_allows_exactly_the_1_6_1_keys() -> None:
    request = schemas()["nvext.json"]["$defs"]["request"]
    assert request["additionalProperties"] is False
    assert set(request["properties"]) == NVEXT_REQUEST_KEYS


def test_every_example_directory_is_a_known_target() -> None:
    directories = {p.name for p in EXAMPLE_DIR.iterdir() if p.is_dir()}
    assert directories == set(TARGETS)


def test_every_schema_file_has_a_valid_example() -> None:
    covered = {TARGETS[p.parent.name].split("#")[0] for p in example_files()}
    assert covered == set(schemas())


@pytest.mark.parametrize("path", example_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_example_is_valid(path: Path) -> None:
    instance = json.loads(path.read_text())
    errors = [e.message for e in validator(path.parent.name).iter_errors(instance)]
    assert not errors


@pytest.mark.parametrize(
    "path",
    [p for p in example_files() if p.parent.name.startswith("admin-reply.")],
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_every_admin_example_is_an_admin_reply(path: Path) -> None:
    root = Draft202012Validator(schemas()["admin-reply.json"], registry=registry())
    assert root.is_valid(json.loads(path.read_text()))


@pytest.mark.parametrize(
    "path",
    [p for p in example_files() if isinstance(json.loads(p.read_text()), dict)],
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_unknown_top_level_keys_are_allowed_except_where_a_typo_must_fail(path: Path) -> None:
    """Wire shapes tolerate keys a future version adds; the nvext request (Dynamo rejects
    unknown keys, also in 1.7's metadata_upload forms) and our own docker deployment file (a
    typo must not be ignored) do not."""
    instance = {**json.loads(path.read_text()), "x_added_in_a_future_version": {"a": [1]}}
    valid = validator(path.parent.name).is_valid(instance)
    closed = (
        "nvext.request",
        "nvext.metadata_upload_v1_7",
        "nvext.generation_artifact_request",
        "docker-deployment",
    )
    assert valid is (path.parent.name not in closed)


def test_instance_id_above_2_pow_53_validates() -> None:
    doc = example("discovery-v1", "spec-example")
    doc["workers"][0]["instance_id"] = 7587886443219045121
    assert validator("discovery-v1").is_valid(doc)
    assert doc["workers"][0]["instance_id"] > 2**53


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_any_u64_instance_id_validates(instance_id: int) -> None:
    doc = example("discovery-v1", "spec-example")
    doc["workers"][0]["instance_id"] = instance_id
    assert validator("discovery-v1").is_valid(doc)


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=0, exclude_min=True, allow_nan=False, allow_infinity=False))
def test_a_positive_logprob_never_validates(logprob: float) -> None:
    doc = example("completion", "observed-length-with-nvext")
    doc["choices"][0]["logprobs"]["token_logprobs"][0] = logprob
    assert not validator("completion").is_valid(doc)


def test_optional_target_keys_may_be_omitted() -> None:
    doc = example("matrix", "two-targets")
    for target in doc["targets"]:
        target.pop("notes", None)
        target.pop("versions", None)
        target.pop("version_sources", None)
        target.pop("dynamo_release_source", None)  # reports written before it existed
    doc.pop("recorded")
    assert validator("matrix").is_valid(doc)
