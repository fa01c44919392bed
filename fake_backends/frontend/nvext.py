"""The ``nvext`` request object: strict key checking and the response selectors.

The real frontend deserializes ``nvext`` with ``deny_unknown_fields`` (CONTRACT-NOTES §U3.1), so an
unknown key is a 400; recorded from 1.6.1, its message is serde's ``unknown field `x`,
expected one of ...`` behind the "Failed to deserialize" prefix.  Unknown
``extra_fields`` selectors, on the other hand, are silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fake_backends.faults.catalogue import ActiveFaults
from fake_backends.frontend.error_bodies import FrontendError, invalid_request, shape_error
from fake_backends.frontend.metadata_upload import NO_FAULTS, parse_1_6, parse_1_7
from fake_backends.model.tokenizer import VOCAB_SIZE

NVEXT_KEYS: tuple[str, ...] = (
    "greed_sampling",
    "use_raw_prompt",
    "annotations",
    "backend_instance_id",
    "token_data",
    "max_thinking_tokens",
    "cache_salt",
    "extra_fields",
    "metadata_upload",
    "prefill_worker_id",
    "decode_worker_id",
    "dp_rank",
    "prefill_dp_rank",
    "agent_hints",
    "request_timestamp_ms",
    "routing_constraints",
    "router",
)

_NESTED_KEYS: Mapping[str, tuple[str, ...]] = {
    "metadata_upload": ("url",),
    "agent_hints": (
        "priority",
        "strict_priority",
        "osl",
        "speculative_prefill",
        "latency_sensitivity",
    ),
    "routing_constraints": ("required_taints", "preferred_taints"),
    "router": ("ttft_target", "itl_target"),
}

SELECTORS = frozenset(
    {
        "completion_token_ids",
        "prompt_token_ids",
        "prompt_logprobs",
        "engine_data",
        "timing",
        "worker_id",
        "stop_reason",
        "detailed_finish_reason",
    }
)

SINGLE_CHOICE_MESSAGE = (
    '`nvext.extra_fields=["completion_token_ids"]` requires exactly one generated choice'
)


def _invalid(message: str) -> FrontendError:
    return shape_error(f"nvext: {message}")


def _unknown_field(key: str, expected: tuple[str, ...]) -> FrontendError:
    listed = ", ".join(f"`{k}`" for k in expected)
    return shape_error(f"unknown field `{key}`, expected one of {listed}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_uint(raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if not _is_int(value) or value < 0:
        raise _invalid(f"`{key}` must be a non-negative integer")
    return int(value)


@dataclass(frozen=True)
class NvextRequest:
    token_data: tuple[int, ...] | None = None
    extra_fields: frozenset[str] = frozenset()
    greed_sampling: bool = False
    pinned_instance: int | None = None
    artifact: bool = False
    """`metadata_upload` asks for a generation artifact (Dynamo 1.7)."""

    def wants(self, selector: str) -> bool:
        return selector in self.extra_fields


def parse_nvext(
    raw: Any, *, artifact_forms: bool = True, faults: ActiveFaults = NO_FAULTS
) -> NvextRequest:
    """Validate the request's ``nvext`` (absent or null means none); ``artifact_forms``: the
    ``metadata_upload`` forms of Dynamo 1.7, else 1.6.1's one."""
    if raw is None or raw == []:
        # serde also reads a struct from a sequence of its fields in order: an empty one sets
        # none (1.6.1 answers 200); `[1]` fails on `greed_sampling`'s type.
        return NvextRequest()
    if not isinstance(raw, Mapping):
        raise _invalid("expected an object")
    for key in raw:
        if key not in NVEXT_KEYS:
            raise _unknown_field(str(key), NVEXT_KEYS)
    for key, allowed in _NESTED_KEYS.items():
        nested = raw.get(key)
        if nested is None or (key == "metadata_upload" and artifact_forms):
            continue
        if not isinstance(nested, Mapping):
            raise _invalid(f"`{key}` must be an object")
        for inner in nested:
            if inner not in allowed:
                raise _unknown_field(str(inner), allowed)
    upload = raw.get("metadata_upload")
    artifact = False
    if upload is not None and artifact_forms:
        artifact = parse_1_7(upload, faults)
    elif upload is not None:
        parse_1_6(upload, _invalid)
    token_data = raw.get("token_data")
    tokens: tuple[int, ...] | None = None
    if token_data is not None:
        if not isinstance(token_data, list) or not all(_is_int(t) for t in token_data):
            raise _invalid("`token_data` must be an array of token ids")
        bad = [t for t in token_data if not 0 <= t < VOCAB_SIZE]
        if bad:
            raise invalid_request()  # real vLLM: no word on which token (chat_token_beyond_vocab)
        tokens = tuple(token_data)
    extra = raw.get("extra_fields")
    selectors: frozenset[str] = frozenset()
    if extra is not None:
        if not isinstance(extra, list) or not all(isinstance(s, str) for s in extra):
            raise _invalid("`extra_fields` must be an array of strings")
        selectors = frozenset(extra) & SELECTORS
    greedy = raw.get("greed_sampling")
    if greedy is not None and not isinstance(greedy, bool):
        raise _invalid("`greed_sampling` must be a boolean")
    backend = _optional_uint(raw, "backend_instance_id")
    decode = _optional_uint(raw, "decode_worker_id")
    return NvextRequest(
        token_data=tokens,
        extra_fields=selectors,
        greed_sampling=bool(greedy),
        pinned_instance=decode if decode is not None else backend,
        artifact=artifact,
    )
