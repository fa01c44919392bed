"""The JSON Schemas in ``schemas/`` are valid, resolvable, documented, and mean what they say.
(Long because of the table of invalid cases, a few per schema.)

Valid examples live in ``tests/schema_examples/<target>/*.json``; a target is a schema file
(``completion``) or one of its ``$defs`` (``nvext.request``). Every invalid case is one of those
valid examples with a single mutation, and must fail with the expected keyword at the expected
place, so a schema cannot pass these tests by rejecting everything.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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

#: The request nvext keys of Dynamo 1.6.1 (CONTRACT-NOTES §U3.1, serde field table).
NVEXT_REQUEST_KEYS = {
    "greed_sampling", "use_raw_prompt", "annotations", "backend_instance_id", "token_data",
    "max_thinking_tokens", "cache_salt", "extra_fields", "metadata_upload", "prefill_worker_id",
    "decode_worker_id", "dp_rank", "prefill_dp_rank", "agent_hints", "request_timestamp_ms",
    "routing_constraints", "router",
}  # fmt: skip

DISCOVERY_OPTIONAL_FIELDS = ("system_url", "admin_base_url", "model", "world_size", "error")
BIG_INSTANCE_ID = 7587886443219045121  # observed in the wild; above 2**53


# --------------------------------------------------------------------------- loading


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


# --------------------------------------------------------------------------- the schema files


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


# --------------------------------------------------------------------------- valid examples


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


# --------------------------------------------------------------------------- invalid cases

DELETE = object()
REPLACE_ROOT: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Bad:
    """``example`` of ``target`` with ``path`` set to ``value`` (or deleted) must fail with
    ``keyword`` at instance path ``at`` (default: ``path``), optionally with ``says`` in the
    error message."""

    id: str
    target: str
    example: str
    path: tuple[Any, ...]
    value: Any = DELETE
    keyword: str = ""
    at: tuple[Any, ...] | None = None
    says: str = ""

    def instance(self) -> Any:
        doc = example(self.target, self.example)
        if self.path == REPLACE_ROOT:
            return copy.deepcopy(self.value)
        parent = doc
        for step in self.path[:-1]:
            parent = parent[step]
        last = self.path[-1]
        if self.value is DELETE:
            del parent[last]
        elif isinstance(parent, list) and last == len(parent):
            parent.append(copy.deepcopy(self.value))
        else:
            assert isinstance(parent, dict) or last < len(parent), self.id
            parent[last] = copy.deepcopy(self.value)
        return doc


W0 = ("workers", 0)
C0 = ("choices", 0)
LP = ("choices", 0, "logprobs")
NV = ("nvext",)
MI = ("meta_info",)
CAP0 = ("capabilities", 0)
CELL = ("capabilities", 0, "cells", "fake-vllm")
VR = "default-run-fake-vllm"
OPENAI_ENVELOPE = {"error": {"message": "bad", "type": "Bad Request", "param": None, "code": 400}}

# fmt: off
BAD_CASES: list[Bad] = [
    # discovery-v1
    *[
        Bad(f"null-{field}", "discovery-v1", "observed-1.6.1", (*W0, field), None, "type")
        for field in DISCOVERY_OPTIONAL_FIELDS
    ],
    Bad("protocol-version-2", "discovery-v1", "observed-1.6.1", ("protocol_version",), 2, "const"),
    Bad("protocol-version-string", "discovery-v1", "observed-1.6.1", ("protocol_version",), "1",
        "type"),
    Bad("workers-missing", "discovery-v1", "no-workers", ("workers",), keyword="required", at=()),
    Bad("instance-id-string", "discovery-v1", "observed-1.6.1", (*W0, "instance_id"),
        str(BIG_INSTANCE_ID), "type"),
    Bad("instance-id-negative", "discovery-v1", "observed-1.6.1", (*W0, "instance_id"), -1,
        "minimum"),
    Bad("instance-id-float", "discovery-v1", "observed-1.6.1", (*W0, "instance_id"), 1.5, "type"),
    Bad("instance-id-missing", "discovery-v1", "observed-1.6.1", (*W0, "instance_id"),
        keyword="required", at=W0),
    Bad("error-with-routes", "discovery-v1", "probe-failure", (*W0, "routes"), ["flush_cache"],
        "maxItems"),
    Bad("error-with-system-url", "discovery-v1", "probe-failure", (*W0, "system_url"),
        "http://10.0.0.12:8081", "not"),
    Bad("error-with-world-size", "discovery-v1", "probe-failure", (*W0, "world_size"), 1, "not"),
    Bad("error-with-admin-base-url", "discovery-v1", "sidecar-with-admin-base-url",
        (*W0, "error"), "probe failed", "not", at=(*W0, "admin_base_url")),
    Bad("error-as-object", "discovery-v1", "probe-failure", (*W0, "error"), {"message": "x"},
        "type"),
    Bad("admin-base-url-without-world-size", "discovery-v1", "sidecar-with-admin-base-url",
        (*W0, "world_size"), keyword="dependentRequired", at=W0),
    Bad("admin-base-url-with-query", "discovery-v1", "sidecar-with-admin-base-url",
        (*W0, "admin_base_url"), "http://10.0.0.13:9000/w?x=1", "pattern"),
    Bad("admin-base-url-with-userinfo", "discovery-v1", "sidecar-with-admin-base-url",
        (*W0, "admin_base_url"), "http://user@10.0.0.13:9000", "pattern"),
    Bad("world-size-zero", "discovery-v1", "observed-1.6.1", (*W0, "world_size"), 0, "minimum"),
    Bad("transport-two-keys", "discovery-v1", "observed-1.6.1", (*W0, "transport"),
        {"tcp": "a:1", "nats_tcp": "b"}, "maxProperties"),
    Bad("transport-unknown-kind", "discovery-v1", "observed-1.6.1", (*W0, "transport"),
        {"udp": "a:1"}, "enum"),
    Bad("transport-empty", "discovery-v1", "observed-1.6.1", (*W0, "transport"), {},
        "minProperties"),
    Bad("transport-address-not-string", "discovery-v1", "observed-1.6.1", (*W0, "transport"),
        {"tcp": 1234}, "type", at=(*W0, "transport", "tcp")),
    Bad("request-plane-url-http", "discovery-v1", "observed-1.6.1", (*W0, "request_plane_url"),
        "http://dynamo.backend.rl", "pattern"),
    Bad("routes-duplicate", "discovery-v1", "observed-1.6.1", (*W0, "routes", 1),
        "abort_request", "uniqueItems", at=(*W0, "routes")),
    Bad("routes-empty-entry", "discovery-v1", "observed-1.6.1", (*W0, "routes", 0), "",
        "minLength"),
    Bad("routes-missing", "discovery-v1", "observed-1.6.1", (*W0, "routes"), keyword="required",
        at=W0),
    # discovery-error
    Bad("wrong-tag", "discovery-error", "discovery-failed", ("error",), "internal", "const"),
    Bad("message-missing", "discovery-error", "discovery-failed", ("message",),
        keyword="required", at=()),
    # nvext.request
    Bad("unknown-key-prompt-logprobs", "nvext.request", "observed-extra-fields",
        ("prompt_logprobs",), 1, "additionalProperties", at=()),
    Bad("token-data-negative", "nvext.request", "every-key", ("token_data", 0), -1, "minimum"),
    Bad("token-data-string-id", "nvext.request", "every-key", ("token_data", 0), "151644", "type"),
    Bad("token-data-null", "nvext.request", "every-key", ("token_data",), None, "type"),
    Bad("extra-fields-not-strings", "nvext.request", "every-key", ("extra_fields", 0), 7, "type"),
    Bad("metadata-upload-extra-key", "nvext.request", "every-key", ("metadata_upload", "ttl"), 60,
        "additionalProperties", at=("metadata_upload",)),
    Bad("metadata-upload-empty-url", "nvext.request", "every-key", ("metadata_upload", "url"), "",
        "minLength"),
    Bad("metadata-upload-blank-url", "nvext.request", "every-key", ("metadata_upload", "url"),
        "   ", "pattern"),
    Bad("metadata-upload-no-url", "nvext.request", "every-key", ("metadata_upload", "url"),
        keyword="required", at=("metadata_upload",)),
    Bad("metadata-upload-1-7-unknown-key", "nvext.metadata_upload_v1_7", "with-fallback",
        ("rollout_id",), "r1", "additionalProperties", at=()),
    Bad("metadata-upload-1-7-blank-fallback", "nvext.metadata_upload_v1_7", "with-fallback",
        ("fallback_url",), " ", "pattern"),
    Bad("artifact-unknown-kind", "nvext.generation_artifact_request", "inline", ("kind",),
        "nope", "const"),
    Bad("artifact-unknown-content", "nvext.generation_artifact_request", "inline",
        ("contents", 0), "hidden_states", "enum"),
    Bad("artifact-inline-with-destination", "nvext.generation_artifact_request", "inline",
        ("destination",), {"url": "s3://b/k"}, "not", at=()),
    Bad("artifact-store-without-destination", "nvext.generation_artifact_request",
        "object-store", ("destination",), keyword="required", at=()),
    Bad("artifact-result-unknown-error", "nvext.generation_artifact_result", "failed",
        ("error_code",), "timeout", "enum"),
    Bad("agent-hints-unknown-key", "nvext.request", "every-key", ("agent_hints", "urgency"), 1,
        "additionalProperties", at=("agent_hints",)),
    Bad("routing-constraints-unknown-key", "nvext.request", "every-key",
        ("routing_constraints", "taints"), [], "additionalProperties",
        at=("routing_constraints",)),
    Bad("router-unknown-key", "nvext.request", "every-key", ("router", "ttft"), 1.0,
        "additionalProperties", at=("router",)),
    Bad("dp-rank-above-u32", "nvext.request", "every-key", ("dp_rank",), 2**32, "maximum"),
    # nvext.prompt_logprobs and nvext.response
    Bad("prompt-logprobs-first-not-null", "nvext.prompt_logprobs", "observed-vllm-shape", (0,),
        {"1": {"logprob": -1.0}}, "type"),
    Bad("prompt-logprobs-empty", "nvext.prompt_logprobs", "single-token-prompt", REPLACE_ROOT, [],
        "minItems", at=()),
    Bad("prompt-logprobs-positive", "nvext.prompt_logprobs", "observed-vllm-shape",
        (1, "945", "logprob"), 0.25, "maximum"),
    Bad("prompt-logprobs-non-numeric-key", "nvext.prompt_logprobs", "observed-vllm-shape",
        (1, "sti"), {"logprob": -1.0}, "pattern", at=(1,)),
    Bad("prompt-logprobs-rank-zero", "nvext.prompt_logprobs", "observed-vllm-shape",
        (1, "945", "rank"), 0, "minimum"),
    Bad("prompt-logprobs-no-logprob", "nvext.prompt_logprobs", "observed-vllm-shape",
        (1, "945", "logprob"), keyword="required", at=(1, "945")),
    Bad("prompt-logprobs-empty-position", "nvext.prompt_logprobs", "observed-vllm-shape", (2,), {},
        "minProperties"),
    Bad("response-null-completion-ids", "nvext.response", "every-field",
        ("completion_token_ids",), None, "type"),
    Bad("response-negative-token-id", "nvext.response", "every-field",
        ("completion_token_ids", 1), -11, "minimum"),
    Bad("response-prompt-logprobs-shifted", "nvext.response", "finish-chunk",
        ("prompt_logprobs", 0), {"1": {"logprob": -2.0}}, "type"),
    Bad("detailed-finish-reason-abort", "nvext.response", "every-field",
        ("detailed_finish_reason",), "abort", "enum"),
    Bad("stop-reason-bool", "nvext.response", "every-field", ("stop_reason",), True, "type"),
    Bad("timing-without-received", "nvext.response", "every-field",
        ("timing", "request_received_ms"), keyword="required", at=("timing",)),
    Bad("kv-hit-rate-above-one", "nvext.response", "every-field", ("timing", "kv_hit_rate"), 1.5,
        "maximum"),
    Bad("worker-id-negative", "nvext.response", "every-field",
        ("worker_id", "decode_worker_id"), -1, "minimum"),
    Bad("engine-data-list", "nvext.response", "every-field", ("engine_data",), [], "type"),
    # completion
    Bad("object-chat", "completion", "observed-length-with-nvext", ("object",), "chat.completion",
        "const"),
    Bad("positive-token-logprob", "completion", "observed-length-with-nvext",
        (*LP, "token_logprobs", 0), 0.5, "maximum"),
    Bad("positive-top-logprob", "completion", "observed-length-with-nvext",
        (*LP, "top_logprobs", 0, "gezi"), 1e-3, "maximum"),
    Bad("top-logprobs-as-list-of-objects", "completion", "observed-length-with-nvext",
        (*LP, "top_logprobs", 0), [{"token": "gezi", "logprob": -1.12, "bytes": None}], "type"),
    Bad("tokens-not-strings", "completion", "observed-length-with-nvext", (*LP, "tokens", 0), 3067,
        "type"),
    Bad("logprobs-without-text-offset", "completion", "observed-length-with-nvext",
        (*LP, "text_offset"), keyword="required", at=LP),
    Bad("finish-reason-abort", "completion", "observed-length-with-nvext",
        (*C0, "finish_reason"), "abort", "enum"),
    Bad("finish-reason-eos", "completion", "observed-eos", (*C0, "finish_reason"), "eos", "enum"),
    Bad("final-choice-without-finish-reason", "completion", "no-logprobs-n2",
        (*C0, "finish_reason"), keyword="required", at=C0),
    Bad("usage-missing", "completion", "observed-length-with-nvext", ("usage",),
        keyword="required", at=()),
    Bad("usage-null", "completion", "observed-length-with-nvext", ("usage",), None, "type"),
    Bad("usage-negative", "completion", "observed-length-with-nvext",
        ("usage", "completion_tokens"), -2, "minimum"),
    Bad("nvext-inside-response-bad", "completion", "observed-length-with-nvext",
        (*NV, "prompt_logprobs", 0), {"1": {"logprob": -1.0}}, "type"),
    Bad("nvext-null", "completion", "observed-length-with-nvext", NV, None, "type"),
    # completion-chunk
    Bad("chunk-choices-missing", "completion-chunk", "usage-chunk", ("choices",),
        keyword="required", at=()),
    Bad("chunk-text-null", "completion-chunk", "content-chunk", (*C0, "text"), None, "type"),
    Bad("chunk-finish-reason-cancelled", "completion-chunk", "stop-string-finish-chunk",
        (*C0, "finish_reason"), "cancelled", "enum"),
    Bad("chunk-completion-ids-strings", "completion-chunk", "content-chunk",
        (*NV, "completion_token_ids", 0), "3067", "type"),
    Bad("chunk-object-chat", "completion-chunk", "content-chunk", ("object",),
        "chat.completion.chunk", "const"),
    # chat-completion
    Bad("chat-object-text-completion", "chat-completion", "plain", ("object",), "text_completion",
        "const"),
    Bad("chat-role-user", "chat-completion", "plain", (*C0, "message", "role"), "user", "const"),
    Bad("chat-message-without-role", "chat-completion", "plain", (*C0, "message", "role"),
        keyword="required", at=(*C0, "message")),
    Bad("chat-finish-reason-abort", "chat-completion", "plain", (*C0, "finish_reason"), "abort",
        "enum"),
    Bad("chat-positive-logprob", "chat-completion", "observed-logprobs",
        (*LP, "content", 0, "logprob"), 0.1, "maximum"),
    Bad("chat-token-id-negative", "chat-completion", "observed-logprobs",
        (*LP, "content", 0, "token_id"), -5, "minimum"),
    Bad("chat-token-id-string", "chat-completion", "observed-logprobs",
        (*LP, "content", 0, "token_id"), "1078", "type"),
    Bad("chat-byte-out-of-range", "chat-completion", "observed-logprobs",
        (*LP, "content", 0, "bytes", 0), 256, "maximum"),
    Bad("chat-top-logprob-without-bytes", "chat-completion", "observed-logprobs",
        (*LP, "content", 1, "top_logprobs", 0, "bytes"), keyword="required",
        at=(*LP, "content", 1, "top_logprobs", 0)),
    Bad("chat-top-logprob-positive", "chat-completion", "observed-logprobs",
        (*LP, "content", 1, "top_logprobs", 1, "logprob"), 2.0, "maximum"),
    Bad("chat-logprobs-without-content", "chat-completion", "observed-logprobs",
        (*LP, "content"), keyword="required", at=LP),
    Bad("chat-prompt-logprobs-not-starting-null", "chat-completion", "observed-logprobs",
        ("prompt_logprobs", 0), {"945": {"logprob": -1.0}}, "type"),
    Bad("chat-prompt-logprobs-null", "chat-completion", "observed-logprobs",
        ("prompt_logprobs",), None, "type"),
    # chat-completion-chunk
    Bad("chat-chunk-object", "chat-completion-chunk", "content-chunk", ("object",),
        "chat.completion", "const"),
    Bad("chat-chunk-delta-missing", "chat-completion-chunk", "content-chunk", (*C0, "delta"),
        keyword="required", at=C0),
    Bad("chat-chunk-content-number", "chat-completion-chunk", "content-chunk",
        (*C0, "delta", "content"), 5, "type", at=(*C0, "delta", "content")),
    Bad("chat-chunk-role-system", "chat-completion-chunk", "role-chunk", (*C0, "delta", "role"),
        "system", "const"),
    Bad("chat-chunk-finish-reason-eos", "chat-completion-chunk", "finish-chunk",
        (*C0, "finish_reason"), "eos", "enum"),
    Bad("chat-chunk-usage-incomplete", "chat-completion-chunk", "usage-chunk",
        ("usage", "total_tokens"), keyword="required", at=("usage",)),
    # sglang-generate
    Bad("sglang-final-finish-null", "sglang-generate", "b1-logprobs", (*MI, "finish_reason"), None,
        "not"),
    Bad("sglang-finish-type-unknown", "sglang-generate", "b1-logprobs",
        (*MI, "finish_reason", "type"), "eos", "const"),
    Bad("sglang-abort-without-message", "sglang-generate", "aborted-running",
        (*MI, "finish_reason", "message"), keyword="required", at=(*MI, "finish_reason"),
        says="'message'"),
    Bad("sglang-finish-reason-string", "sglang-generate", "b1-logprobs", (*MI, "finish_reason"),
        "length", "type"),
    Bad("sglang-meta-without-id", "sglang-generate", "b1-logprobs", (*MI, "id"),
        keyword="required", at=MI),
    Bad("sglang-output-ids-negative", "sglang-generate", "b1-logprobs", ("output_ids", 0), -10,
        "minimum"),
    Bad("sglang-logprob-pair", "sglang-generate", "b1-logprobs",
        (*MI, "output_token_logprobs", 0), [-0.5, 10], "minItems"),
    Bad("sglang-logprob-positive", "sglang-generate", "b1-logprobs",
        (*MI, "output_token_logprobs", 1, 0), 1.2, "maximum"),
    Bad("sglang-logprob-token-id-string", "sglang-generate", "b1-logprobs",
        (*MI, "output_token_logprobs", 1, 1), "11", "type"),
    Bad("sglang-top-logprobs-flat", "sglang-generate", "b1-logprobs",
        (*MI, "output_top_logprobs", 0), [-0.5, 10, None], "type",
        at=(*MI, "output_top_logprobs", 0, 0)),
    Bad("sglang-weight-version-number", "sglang-generate", "b1-logprobs",
        (*MI, "weight_version"), 7, "type"),
    # sglang-generate-chunk
    Bad("sglang-chunk-no-completion-tokens", "sglang-generate-chunk", "b1-stream-first",
        (*MI, "completion_tokens"), keyword="required", at=MI),
    Bad("sglang-chunk-meta-missing", "sglang-generate-chunk", "b1-stream-first", MI,
        keyword="required", at=()),
    Bad("sglang-chunk-index-negative", "sglang-generate-chunk", "batch-stream-with-index",
        ("index",), -1, "minimum"),
    # error
    Bad("openai-envelope", "error", "model-not-found", REPLACE_ROOT, OPENAI_ENVELOPE, "required",
        at=()),
    Bad("code-missing", "error", "model-not-found", ("code",), keyword="required", at=(),
        says="'code'"),
    Bad("type-missing", "error", "model-not-found", ("type",), keyword="required", at=(),
        says="'type'"),
    Bad("code-as-string", "error", "model-not-found", ("code",), "404", "type"),
    Bad("code-not-an-error", "error", "model-not-found", ("code",), 200, "minimum"),
    Bad("details-not-object", "error", "backend-5xx-coerced", ("details",), "502", "type"),
    Bad("stream-error-flat", "error.stream_error", "observed-1.6.1", REPLACE_ROOT,
        {"message": "Internal server error", "type": "internal_server_error", "code": 500},
        "required", at=()),
    Bad("stream-error-code-string", "error.stream_error", "observed-1.6.1", ("error", "code"),
        "500", "type"),
    # admin-reply
    Bad("vllm-status-unknown", "admin-reply.vllm", "pause", ("status",), "paused", "enum"),
    Bad("vllm-error-without-message", "admin-reply.vllm", "handled-failure-http-200",
        ("message",), keyword="required", at=()),
    Bad("vllm-no-status", "admin-reply.vllm", "liveness", ("status",), keyword="required", at=()),
    Bad("sglang-success-string", "admin-reply.sglang", "update-weight-version", ("success",),
        "true", "type"),
    Bad("sglang-no-message", "admin-reply.sglang", "update-weight-version", ("message",),
        keyword="required", at=()),
    Bad("route-not-found-other-tag", "admin-reply.route_not_found", "unknown-route", ("error",),
        "Not Found", "const"),
    Bad("invalid-json-message-missing", "admin-reply.invalid_json", "bad-body", ("message",),
        keyword="required", at=()),
    # matrix
    Bad("cell-outcome-ok", "matrix", "two-targets", (*CELL, "outcome"), "ok", "enum"),
    Bad("cell-without-evidence", "matrix", "two-targets", (*CELL, "evidence"),
        keyword="required", at=CELL),
    Bad("cell-contradicts-as-string", "matrix", "two-targets",
        (*CELL, "contradicts_documentation"), "no", "type"),
    Bad("cell-documented-maybe", "matrix", "two-targets", (*CELL, "documented"), "maybe", "enum"),
    Bad("cell-negative-duration", "matrix", "two-targets", (*CELL, "duration_s"), -0.1,
        "minimum"),
    Bad("capability-id-not-dotted", "matrix", "two-targets", (*CAP0, "id"), "tokens", "pattern"),
    Bad("capability-id-uppercase", "matrix", "two-targets", (*CAP0, "id"), "Tokens.ids",
        "pattern"),
    Bad("check-id-bad", "matrix", "two-targets", (*CELL, "checks", 0, "id"), "completion-ids",
        "pattern"),
    Bad("check-outcome-skipped", "matrix", "two-targets", (*CELL, "checks", 0, "outcome"),
        "skipped", "enum"),
    Bad("test-outcome-unsupported", "matrix", "two-targets", (*CELL, "tests", 0, "outcome"),
        "unsupported", "enum"),
    Bad("docker-backend-unknown", "docker-deployment", "vllm-agg", ("backend",), "tensorrt",
        "enum"),
    Bad("docker-containers-empty", "docker-deployment", "vllm-agg", ("containers",), [],
        "minItems"),
    Bad("docker-unknown-key", "docker-deployment", "vllm-agg", ("containers", 0, "gpu"), 1,
        "additionalProperties", at=("containers", 0)),
    Bad("docker-port-out-of-range", "docker-deployment", "vllm-agg", ("frontend", "port"), 70000,
        "maximum"),
    Bad("docker-environment-number", "docker-deployment", "vllm-agg",
        ("containers", 2, "environment", "DYN_RL_PORT"), 8001, "type"),
    Bad("docker-frontend-missing", "docker-deployment", "vllm-agg", ("frontend",),
        keyword="required", at=()),
    Bad("evidence-without-reproducer", "matrix", "two-targets",
        ("capabilities", 0, "cells", "real-sglang", "evidence", 0, "reproducer"),
        keyword="required", at=("capabilities", 0, "cells", "real-sglang", "evidence", 0)),
    Bad("level-may", "matrix", "two-targets", (*CAP0, "level"), "MAY", "enum"),
    Bad("documented-without-trtllm", "matrix", "two-targets", (*CAP0, "documented", "trtllm"),
        keyword="required", at=(*CAP0, "documented")),
    Bad("summary-without-not-advertised", "matrix", "interrupted-empty",
        ("summary", "not-advertised"), keyword="required", at=("summary",)),
    Bad("target-backend-tgi", "matrix", "two-targets", ("targets", 0, "backend"), "tgi", "enum"),
    Bad("target-without-rl-url", "matrix", "two-targets", ("targets", 0, "rl_url"),
        keyword="required", at=("targets", 0)),
    Bad("target-version-not-string", "matrix", "two-targets",
        ("targets", 0, "versions", "fake_backends"), 1, "type"),
    Bad("target-version-source-empty", "matrix", "two-targets",
        ("targets", 1, "version_sources", "dynamo"), "", "minLength"),
    Bad("target-version-source-not-string", "matrix", "two-targets",
        ("targets", 0, "version_sources", "fake_backends"), ["launcher"], "type"),
    Bad("target-release-source-guessed", "matrix", "two-targets",
        ("targets", 0, "dynamo_release_source"), "default", "enum"),
    Bad("exit-rule-counts-absent", "matrix", "two-targets", ("exit_rule",),
        {"failing": ["absent"], "exempt": {}, "problems": []}, "enum",
        at=("exit_rule", "failing", 0)),
    Bad("exit-rule-without-problems", "matrix", "two-targets", ("exit_rule",),
        {"failing": ["error"], "exempt": {}}, "required", at=("exit_rule",)),
    Bad("recorded-claims-to-be-observed", "matrix", "two-targets",
        ("recorded", "sglang", "source"), "frontend GET /openapi.json", "const"),
    Bad("recorded-without-source", "matrix", "two-targets", ("recorded", "gpu", "source"),
        keyword="required", at=("recorded", "gpu")),
    Bad("recorded-value-empty", "matrix", "two-targets", ("recorded", "gpu", "value"), "",
        "minLength"),
    Bad("recorded-flat-string", "matrix", "two-targets", ("recorded", "gpu"), "H100", "type"),
    Bad("recorded-key-with-space", "matrix", "two-targets", ("recorded", "gpu model"),
        {"value": "H100", "source": "--record"}, "pattern", at=("recorded",)),
    Bad("complete-missing", "matrix", "interrupted-empty", ("complete",), keyword="required",
        at=()),
    Bad("schema-version-2", "matrix", "interrupted-empty", ("schema_version",), 2, "const"),
    Bad("started-at-not-rfc3339", "matrix", "interrupted-empty", ("started_at",),
        "02/12/2026 13:00", "pattern"),
    Bad("suite-renamed", "matrix", "interrupted-empty", ("suite", "name"), "other-suite", "const"),
    # rl-validation-record (the structure of Dynamo's check_rl_validation_record.py)
    Bad("record-schema-v2", "rl-validation-record", VR, ("schema",), "dynamo.rl.validation.v2",
        "const"),
    Bad("record-state-done", "rl-validation-record", VR, ("record_state",), "done", "enum"),
    Bad("record-placement-missing", "rl-validation-record", VR, ("topology", "placement"),
        keyword="required", at=("topology",)),
    Bad("record-serving-mode-pd", "rl-validation-record", VR, ("topology", "serving_mode"), "pd",
        "enum"),
    Bad("record-nodes-string", "rl-validation-record", VR, ("hardware", "nodes"), "2", "type"),
    Bad("record-gate-skipped", "rl-validation-record", VR, ("gates", "token_logprob", "status"),
        "skipped", "enum"),
    Bad("record-prompt-logprobs-yes", "rl-validation-record", VR,
        ("gates", "token_logprob", "prompt_logprobs"), "yes", "enum"),
    Bad("record-cache-flushed", "rl-validation-record", VR,
        ("gates", "policy_update", "cache_handling"), "flushed", "enum"),
    Bad("record-gate-missing", "rl-validation-record", VR, ("gates", "trace_correlation"),
        keyword="required", at=("gates",)),
    Bad("record-overhead-text", "rl-validation-record", VR,
        ("gates", "trace_correlation", "trace_overhead_percent"), "n/a", "type"),
    Bad("record-time-without-offset", "rl-validation-record", VR, ("run", "started_at"),
        "2026-12-03T18:36:21", "pattern"),
    Bad("record-commands-string", "rl-validation-record", VR, ("run", "commands"),
        "rl-conformance run", "type"),
]
# fmt: on


def test_bad_case_ids_are_unique() -> None:
    ids = [case.id for case in BAD_CASES]
    assert len(ids) == len(set(ids))


def test_every_schema_file_has_invalid_cases() -> None:
    covered = {TARGETS[case.target].split("#")[0] for case in BAD_CASES}
    assert covered == set(schemas())


@pytest.mark.parametrize("case", BAD_CASES, ids=lambda case: f"{case.target}:{case.id}")
def test_invalid_instance_fails_for_the_right_reason(case: Bad) -> None:
    errors = flat_errors(validator(case.target).iter_errors(case.instance()))
    assert errors, "the mutated instance validated"
    at = case.path if case.at is None else case.at
    found = [(e.validator, tuple(e.absolute_path), e.message) for e in errors]
    expected = f"{case.keyword!r} at {at}" + (f" saying {case.says}" if case.says else "")
    assert any(
        keyword == case.keyword and path == at and case.says in message
        for keyword, path, message in found
    ), f"expected {expected}; got {found}"


def test_optional_target_keys_may_be_omitted() -> None:
    doc = example("matrix", "two-targets")
    for target in doc["targets"]:
        target.pop("notes", None)
        target.pop("versions", None)
        target.pop("version_sources", None)
        target.pop("dynamo_release_source", None)  # reports written before it existed
    doc.pop("recorded")
    assert validator("matrix").is_valid(doc)
