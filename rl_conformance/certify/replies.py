"""What one generation reply told the client, read the same way on every surface the contract
names: the OpenAI completions and chat routes (ids in `nvext.completion_token_ids` or the raw
`nvext.engine_data`, or spelled `token_id:N` in the logprobs where the request set vLLM's
`return_tokens_as_token_ids`; logprobs in the choices) and SGLang's native `POST /generate` stream
("Generated token IDs: named `nvext.completion_token_ids`, or the native SGLang stream"), whose
events carry `output_ids`, `meta_info.output_token_logprobs` (`[logprob, token_id, text]`
triples) and `meta_info.finish_reason` (`{"type": ...}`), cumulatively by default."""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import Any

from .audit import AuditRecord, Delivery

NATIVE_GENERATE = "/generate"
TERMINAL = ("stop", "length")
TOKEN_ID_PREFIX = "token_id:"
"""vLLM's `return_tokens_as_token_ids` spelling of a generated token: `token_id:<id>`, the
engine's id as text (completions: `logprobs.tokens`; chat: `logprobs.content[].token`)."""


def is_native(record: AuditRecord) -> bool:
    return record.path == NATIVE_GENERATE


def payloads(record: AuditRecord) -> list[dict[str, Any]]:
    """A generation's JSON payloads as the client received them: each stream event, or the
    unary body."""
    found = record.events if record.events else [record.response]
    return [payload for payload in found if isinstance(payload, dict)]


def _nvexts(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The nvext objects of one payload: top-level, and per choice where a backend puts it."""
    out = [payload.get("nvext")]
    out += [choice.get("nvext") for choice in payload.get("choices") or [] if choice]
    return [nvext for nvext in out if isinstance(nvext, dict)]


def _meta(payload: dict[str, Any]) -> dict[str, Any]:
    meta = payload.get("meta_info")
    return meta if isinstance(meta, dict) else {}


def _native_sequence(record: AuditRecord, read: Any) -> list[Any] | None:
    """A list each native event carries (`read(payload)`), over the whole stream: the last
    event's where each extends the one before (SGLang's default, cumulative output), else
    every event's joined (incremental output)."""
    parts = [part for part in (read(p) for p in payloads(record)) if isinstance(part, list)]
    if not parts:
        return None
    cumulative = all(later[: len(earlier)] == earlier for earlier, later in pairwise(parts))
    return list(parts[-1]) if cumulative else [item for part in parts for item in part]


def named_ids(record: AuditRecord) -> list[int] | None:
    """`nvext.completion_token_ids`, concatenated over a stream's events; None when absent."""
    ids: list[int] = []
    found = False
    for payload in payloads(record):
        for nvext in _nvexts(payload):
            got = nvext.get("completion_token_ids")
            if isinstance(got, list):
                found = True
                ids.extend(got)
    return ids if found else None


def _engine_data(record: AuditRecord) -> dict[str, Any] | None:
    """The raw engine payload (`nvext.engine_data`), sent whole with the final output."""
    found = None
    for payload in payloads(record):
        for nvext in _nvexts(payload):
            if isinstance(nvext.get("engine_data"), dict):
                found = nvext["engine_data"]
    return found


def _spelled_id(token: Any) -> int | None:
    """The id a `token_id:<id>` token names, or None for any other token."""
    if not isinstance(token, str) or not token.startswith(TOKEN_ID_PREFIX):
        return None
    digits = token.removeprefix(TOKEN_ID_PREFIX)
    return int(digits) if digits.isascii() and digits.isdigit() else None


def spelled_ids(record: AuditRecord) -> list[int] | None:
    """The generated ids as the selected tokens spell them under vLLM's
    `return_tokens_as_token_ids` (`token_id:<id>`), concatenated over a stream's events; None
    when the reply spells none, or any token otherwise (its text is then not an id)."""
    return _spelled(payloads(record))


def _spelled(found: list[dict[str, Any]]) -> list[int] | None:
    tokens: list[Any] = []
    for payload in found:
        for choice in payload.get("choices") or []:
            logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
            if not isinstance(logprobs, dict):
                continue
            entries = logprobs.get("content")
            if isinstance(entries, list):  # chat: one entry per token
                tokens += [e.get("token") if isinstance(e, dict) else e for e in entries]
            elif isinstance(logprobs.get("tokens"), list):
                tokens += logprobs["tokens"]
    ids = [_spelled_id(token) for token in tokens]
    if not ids or any(found is None for found in ids):
        return None
    return [found for found in ids if found is not None]


def engine_ids(record: AuditRecord) -> list[int] | None:
    """The engine-returned ids: the native stream's `output_ids`; else the named field, else
    the raw engine payload's `completion_token_ids` (the engine's own values, forwarded
    verbatim), else the selected tokens spelled `token_id:<id>` (vLLM's
    `return_tokens_as_token_ids`: ids as text, nothing re-encoded)."""
    if is_native(record):
        return _native_sequence(record, lambda payload: payload.get("output_ids"))
    named = named_ids(record)
    if named is not None:
        return named
    got = (_engine_data(record) or {}).get("completion_token_ids")
    if isinstance(got, list):
        return list(got)
    return spelled_ids(record)


def asks_engine_ids(body: Any) -> bool:
    """The request asks the deployment for the generated ids: by name
    (`nvext.extra_fields` with `completion_token_ids`), inside the raw engine payload
    (`engine_data`), or vLLM's way (`return_tokens_as_token_ids` with logprobs, which then
    spell each selected token `token_id:<id>`)."""
    body = body if isinstance(body, dict) else {}
    nvext = body.get("nvext") if isinstance(body.get("nvext"), dict) else {}
    fields = nvext.get("extra_fields") if isinstance(nvext.get("extra_fields"), list) else []
    if {"completion_token_ids", "engine_data"} & {f for f in fields if isinstance(f, str)}:
        return True
    logprobs = body.get("logprobs")
    asked = logprobs is True or (isinstance(logprobs, int) and not isinstance(logprobs, bool))
    return body.get("return_tokens_as_token_ids") is True and asked


def selected_logprobs(record: AuditRecord) -> list[float | None]:
    """The selected log probabilities the reply carries: the OpenAI surface's (float32 on the
    wire), or the native stream's `output_token_logprobs`."""
    if is_native(record):
        triples = _native_sequence(
            record, lambda payload: _meta(payload).get("output_token_logprobs")
        )
        return [t[0] if isinstance(t, list) and t else None for t in triples or []]
    out: list[float | None] = []
    for event in payloads(record):
        for choice in event.get("choices") or []:
            logprobs = choice.get("logprobs") or {}
            if "content" in logprobs:  # chat: one entry per generated token
                out.extend(entry.get("logprob") for entry in logprobs.get("content") or [])
            else:
                out.extend(logprobs.get("token_logprobs") or [])
    return out


def engine_logprobs(record: AuditRecord) -> list[float | None] | None:
    """`engine_data.completion_logprobs`: the worker's values before the frontend's float32."""
    got = (_engine_data(record) or {}).get("completion_logprobs")
    return list(got) if isinstance(got, list) else None


def _float32(value: Any) -> bytes | None:
    try:
        return struct.pack("<f", value)
    except (struct.error, OverflowError, TypeError):
        return None


def same_at_float32(admitted: list[Any], wire: list[Any]) -> bool:
    """Equal at the precision the OpenAI surface carries (float32), None where None."""
    if len(admitted) != len(wire):
        return False
    for mine, theirs in zip(admitted, wire, strict=True):
        if mine is None or theirs is None:
            if mine is not theirs:
                return False
        elif isinstance(mine, bool) or _float32(mine) is None or _float32(mine) != _float32(theirs):
            return False
    return True


def logprobs_match(admitted: list[Any], record: AuditRecord) -> bool:
    """The admitted values are the engine's: exactly the raw engine payload's, or the reply's
    own field at float32 precision."""
    engine = engine_logprobs(record)
    if engine is not None and admitted == engine:
        return True
    return same_at_float32(admitted, selected_logprobs(record))


def prompt_ids(record: AuditRecord) -> Any:
    """The prompt as sent: `prompt` on completions, `nvext.token_data` (which bypasses the chat
    template) on chat completions, `input_ids` on the native route."""
    body = record.body if isinstance(record.body, dict) else {}
    if is_native(record):
        return body.get("input_ids")
    if "messages" in body:
        return (body.get("nvext") or {}).get("token_data")
    return body.get("prompt")


def finish_reasons(record: AuditRecord) -> list[Any]:
    """Every finish reason the reply reported, in order (a native `{"type": ...}` by type)."""
    if is_native(record):
        found = [_meta(payload).get("finish_reason") for payload in payloads(record)]
        return [f.get("type") if isinstance(f, dict) else f for f in found if f is not None]
    return [
        choice.get("finish_reason")
        for payload in payloads(record)
        for choice in payload.get("choices") or []
        if choice.get("finish_reason") is not None
    ]


def verified_terminal(record: AuditRecord) -> bool:
    """The client received the whole response and it ends in a terminal success state."""
    if record.status != 200 or record.delivery != Delivery.COMPLETE:
        return False
    finishes = finish_reasons(record)
    if record.events:
        if record.events[-1] != "[DONE]":
            return False
        return any(f in TERMINAL for f in finishes) and not any(
            isinstance(e, dict) and "error" in e for e in record.events
        )
    return bool(finishes) and finishes[0] in TERMINAL


def carries_tokens(record: AuditRecord, event: Any) -> bool:
    """A stream event that delivered generated tokens."""
    if not isinstance(event, dict):
        return False
    if is_native(record):
        return bool(event.get("output_ids"))
    if any(nvext.get("completion_token_ids") for nvext in _nvexts(event)):
        return True
    return bool(_spelled([event]))


def raw_payload_hazard(record: AuditRecord) -> str:
    """Why a client that asks for the generated ids only inside the raw engine payload meets
    replies without them (the frontend drops `nvext.engine_data` on a stop-string finish), as a
    clause to add to a finding; empty for any other request."""
    body = record.body if isinstance(record.body, dict) else {}
    fields = set(((body.get("nvext") or {}).get("extra_fields")) or [])
    if is_native(record) or "engine_data" not in fields or "completion_token_ids" in fields:
        return ""
    return (
        "; the request asked for the ids only inside nvext.engine_data, which the Dynamo "
        "frontend drops on a stop-string finish while keeping the named completion_token_ids "
        "(recorded: Dynamo 1.6.1, completions_stop_string.json; spec: 'Prefer named fields over "
        "the raw engine payload')"
    )
