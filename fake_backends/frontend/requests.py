"""Validation of OpenAI-compatible request bodies into one engine-facing request.

Completions and chat differ only in how the prompt is formed and how logprobs are asked
for; after this module both are a ``GenerationRequest``, so the engine path is shared.
Failures are 400s in the two message families recorded from 1.6.1: a body that does not
fit the request type ("Failed to deserialize the JSON body into the target type: ...",
e.g. a missing ``prompt`` or a negative ``max_tokens``) and semantic checks
("Validation: ...", e.g. ``max_tokens: 0``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from fake_backends.faults.catalogue import ActiveFaults
from fake_backends.frontend.error_bodies import (
    FrontendError,
    invalid_request,
    shape_error,
    validation_error,
)
from fake_backends.frontend.metadata_upload import NO_FAULTS, check_artifact_request
from fake_backends.frontend.nvext import SINGLE_CHOICE_MESSAGE, NvextRequest, parse_nvext
from fake_backends.frontend.validation import deserialize, engine_refusal, validate
from fake_backends.model.decoding import DEFAULT_MAX_TOKENS, SamplingParams
from fake_backends.model.directory import CONTEXT_LENGTH
from fake_backends.model.tokenizer import BOS_ID, VOCAB_SIZE, encode, render_chat

Endpoint = Literal["completions", "chat"]

MAX_N = 128


@dataclass(frozen=True)
class GenerationRequest:
    endpoint: Endpoint
    model: str | None
    prompt_ids: tuple[int, ...]
    n: int
    params: SamplingParams
    logprobs: int | None  # k alternatives per generated token; None = no logprobs
    prompt_logprobs: int | None
    stream: bool
    include_usage: bool
    nvext: NvextRequest
    tokens_as_ids: bool = False
    """``return_tokens_as_token_ids``: every logprob token is spelled ``token_id:<id>``."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_UNSIGNED_MAX = {"u8": 255, "u32": 2**32 - 1}


def _opt_int(body: Mapping[str, Any], key: str, kind: str = "u32") -> int | None:
    """An optional integer of a Rust-side type: ``u8``, ``u32`` or ``i64``."""
    value = body.get(key)
    if value is None:
        return None
    if not _is_int(value):
        raise shape_error(f"{key}: invalid type: {type(value).__name__}, expected {kind}")
    if kind in _UNSIGNED_MAX and not 0 <= value <= _UNSIGNED_MAX[kind]:
        raise shape_error(f"{key}: invalid value: integer `{value}`, expected {kind}")
    return int(value)


def _opt_bool(body: Mapping[str, Any], key: str) -> bool | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise shape_error(f"{key}: invalid type: {type(value).__name__}, expected a boolean")
    return value


def _max_tokens(body: Mapping[str, Any], key: str) -> int | None:
    value = _opt_int(body, key)
    if value == 0:
        raise validation_error("Max tokens must be greater than 0, got 0")
    return value


def _opt_temperature(body: Mapping[str, Any]) -> float | None:
    value = body.get("temperature")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise shape_error("temperature: invalid type, expected f32")
    if not 0 <= value <= 2:
        raise validation_error(f"Temperature must be between 0 and 2, got {value:g}")
    return float(value)


def _token_list(value: Any, what: str, *, wrap: bool = False) -> list[int]:
    """The ids, refused when one is outside the vocabulary (``wrap``: the fault
    ``token_ids_wrapped`` reduces them modulo the vocabulary instead and serves them)."""
    if not isinstance(value, list) or not all(_is_int(t) for t in value):
        raise shape_error(f"{what}: invalid type, expected a sequence of u32")
    if wrap:
        return [token % VOCAB_SIZE for token in value]
    for token in value:
        if not 0 <= token < VOCAB_SIZE:
            if what == "prompt":  # recorded with real vLLM (completions_token_beyond_vocab)
                raise invalid_request()
            raise validation_error(f"token id {token} in {what} is outside the vocabulary")
    return list(value)


def refuse_beyond_vocabulary(body: Any, vocabulary: int) -> None:
    """A model of ``vocabulary`` ids refuses a prompt id, or a chat ``nvext.token_data`` id, at
    or beyond it with the recorded 400, streamed requests too, before any event (real vLLM 0.31.0
    behind Dynamo 1.6.1: ``vllm-cpu/completions_token_beyond_vocab``, ``..._stream``,
    ``chat_token_beyond_vocab``). Ids the toy tokenizer gives a text prompt are not limited."""
    if vocabulary >= VOCAB_SIZE or not isinstance(body, Mapping):
        return
    nvext = body.get("nvext")
    given = [body.get("prompt"), nvext.get("token_data") if isinstance(nvext, Mapping) else None]
    for ids in given:
        if isinstance(ids, list) and any(_is_int(t) and t >= vocabulary for t in ids):
            raise invalid_request()


def _stops(body: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """``stop`` as strings, plus any token ids given as ``stop`` or ``stop_token_ids``."""
    raw = body.get("stop")
    strings: list[str] = []
    ids: list[int] = []
    if isinstance(raw, str):
        strings = [raw]
    elif isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        strings = list(raw)
    elif isinstance(raw, list) and raw and all(_is_int(t) for t in raw):
        ids = _token_list(raw, "stop")
    elif raw is not None:
        raise shape_error("stop: data did not match any variant of untagged enum Stop")
    extra = body.get("stop_token_ids")
    if extra is not None:
        ids += _token_list(extra, "stop_token_ids")
    return tuple(strings), tuple(ids)


def _stream_flags(body: Mapping[str, Any]) -> tuple[bool, bool]:
    stream = bool(_opt_bool(body, "stream"))
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, Mapping):
            raise shape_error(
                "stream_options: invalid type, expected struct ChatCompletionStreamOptions"
            )
        include_usage = bool(_opt_bool(options, "include_usage"))
    return stream, include_usage


def _model(body: Mapping[str, Any]) -> str | None:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise shape_error("model: invalid type, expected a string")
    return model


def _completion_prompt(
    body: Mapping[str, Any], *, bos_on_text: bool, wrap_ids: bool = False
) -> list[int]:
    if "prompt" not in body or body["prompt"] is None:
        raise shape_error("missing field `prompt`")
    prompt = body["prompt"]
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one is that one prompt
    if isinstance(prompt, str):
        ids = encode(prompt)
        return [BOS_ID, *ids] if bos_on_text else ids
    if isinstance(prompt, list) and all(_is_int(t) for t in prompt):
        return _token_list(prompt, "prompt", wrap=wrap_ids)
    if isinstance(prompt, list):
        raise validation_error("batched prompts are not supported; send one prompt per request")
    raise shape_error("prompt: data did not match any variant of untagged enum Prompt")


def _common(
    body: Mapping[str, Any], nvext: NvextRequest, max_tokens: int | None, top_k: int | None
) -> SamplingParams:
    stops, stop_ids = _stops(body)
    ignore_eos = bool(_opt_bool(body, "ignore_eos"))
    if ignore_eos:  # as the real frontend's StopConditions::apply_ignore_eos: no stop at all
        stops, stop_ids = (), ()
    temperature = 0.0 if nvext.greed_sampling else _opt_temperature(body)
    return SamplingParams(
        max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
        temperature=temperature,
        seed=_opt_int(body, "seed", "i64"),
        stop=stops,
        stop_token_ids=stop_ids,
        ignore_eos=ignore_eos,
        min_tokens=_opt_int(body, "min_tokens") or 0,
        top_k=top_k,
    )


def _choices(body: Mapping[str, Any]) -> int:
    n = _opt_int(body, "n", "u8")
    if n is None:
        return 1
    if not 1 <= n <= MAX_N:
        raise validation_error(f"n must be between 1 and {MAX_N}, got {n}")
    return n


def _check_single_choice(nvext: NvextRequest, n: int) -> None:
    if nvext.wants("completion_token_ids") and n != 1:
        raise validation_error(SINGLE_CHOICE_MESSAGE)


def _check_diverse(body: Mapping[str, Any], n: int) -> None:
    """The 1.6.1 frontend refuses several choices at an explicit temperature 0 (after the
    single-choice check; an omitted temperature passes): ``vllm-cpu/completions_n2.json``."""
    temperature = body.get("temperature")
    if n > 1 and _is_number(temperature) and temperature == 0:
        raise validation_error(
            f"When n > 1, temperature must be greater than 0 to ensure diverse outputs. "
            f"Got n={n}, temperature=0"
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_context(prompt: list[int], max_tokens: int | None, *, enforced: bool = True) -> None:
    """400 ``Invalid request`` with ``details.type: context_length`` when the prompt, or the
    prompt plus ``max_tokens``, exceeds the context window; ``actual`` is the prompt length
    when the prompt alone is too long (``vllm-cpu/completions_prompt_too_long.json``,
    ``completions_prompt_plus_max_tokens_too_long.json``)."""
    actual = len(prompt)
    if not enforced:  # the fault context_window_unchecked: served, clamped to the window
        return
    if actual <= CONTEXT_LENGTH and max_tokens is not None:
        actual += max_tokens
    if actual > CONTEXT_LENGTH:
        raise invalid_request(type="context_length", limit=CONTEXT_LENGTH, actual=actual)


def _require_object(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise shape_error("invalid type: expected a JSON object")
    return body


def parse_completion_request(
    raw: Any,
    *,
    bos_on_text: bool = False,
    single_choice_ids: bool = True,
    wrap_ids: bool = False,
    check_context: bool = True,
    plays_1_6: bool = False,
    faults: ActiveFaults = NO_FAULTS,
    served: str | None = None,
    engine: str = "vllm",
) -> GenerationRequest:
    """``POST /v1/completions``.

    ``echo`` is not implemented, as in Dynamo 1.6.1 (CONTRACT-NOTES §O6.4): the prompt never
    appears in the choices, but the engine is still asked for prompt logprobs (k=1),
    which surface only through ``nvext.extra_fields: ["prompt_logprobs"]``.
    ``single_choice_ids=False`` skips the one-choice check on ``completion_token_ids``
    (the ``validation_accepted`` fault). ``served``: the model the deployment serves, looked up
    after the frontend's own validation (``validation``), before the engine's. ``plays_1_6``:
    validate as Dynamo 1.6 does (else as 1.7). ``engine``: the backend whose own refusals follow.
    """
    body = _require_object(raw)
    deserialize(body, "completions")
    validate(body, "completions", plays_1_6=plays_1_6)
    model = _model(body)
    nvext = parse_nvext(body.get("nvext"), artifact_forms=not plays_1_6, faults=faults)
    echo = bool(_opt_bool(body, "echo"))
    if nvext.token_data is not None:
        prompt = list(nvext.token_data)
    else:
        prompt = _completion_prompt(body, bos_on_text=bos_on_text, wrap_ids=wrap_ids)
    max_tokens = _max_tokens(body, "max_tokens")
    logprobs = _opt_int(body, "logprobs", "u8")
    prompt_logprobs = _opt_int(body, "prompt_logprobs", "u8")
    if echo and prompt_logprobs is None:
        prompt_logprobs = 1
    n = _choices(body)
    if single_choice_ids:
        _check_single_choice(nvext, n)
    stream, include_usage = _stream_flags(body)
    params = _common(body, nvext, max_tokens, logprobs)
    if nvext.artifact:
        check_artifact_request(params.stop, max(n, _best_of(body)), faults)
    _check_diverse(body, n)
    _engine_checks(body, "completions", model, served, engine)
    _check_context(prompt, max_tokens, enforced=check_context)
    return GenerationRequest(
        endpoint="completions",
        model=model,
        prompt_ids=tuple(prompt),
        n=n,
        params=params,
        logprobs=logprobs,
        prompt_logprobs=prompt_logprobs,
        stream=stream,
        include_usage=include_usage,
        nvext=nvext,
        tokens_as_ids=bool(_opt_bool(body, "return_tokens_as_token_ids")),
    )


def parse_chat_request(
    raw: Any,
    *,
    plays_1_6: bool = False,
    faults: ActiveFaults = NO_FAULTS,
    served: str | None = None,
    engine: str = "vllm",
) -> GenerationRequest:
    """``POST /v1/chat/completions``; ``nvext.token_data`` bypasses the chat template."""
    body = _require_object(raw)
    deserialize(body, "chat")
    validate(body, "chat", plays_1_6=plays_1_6)
    model = _model(body)
    nvext = parse_nvext(body.get("nvext"), artifact_forms=not plays_1_6, faults=faults)
    messages = body.get("messages")
    if messages is None:
        raise shape_error("missing field `messages`")
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise shape_error("messages: invalid type, expected a sequence of messages")
    try:
        rendered = render_chat(messages)
    except ValueError as exc:
        raise validation_error(str(exc)) from None
    prompt = list(nvext.token_data) if nvext.token_data is not None else rendered
    max_tokens = _max_tokens(body, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _max_tokens(body, "max_tokens")
    top_logprobs = _opt_int(body, "top_logprobs", "u8")
    logprobs: int | None = None
    if _opt_bool(body, "logprobs"):
        # CONTRACT-NOTES §O6.6: logprobs without top_logprobs asks the engine for 1; top_logprobs
        # without logprobs asks for none (real vLLM 0.31.0 behind 1.6.1: `logprobs: null`).
        logprobs = 1 if top_logprobs is None else top_logprobs
    prompt_logprobs = _opt_int(body, "prompt_logprobs", "u8")
    n = _choices(body)
    _check_single_choice(nvext, n)
    stream, include_usage = _stream_flags(body)
    params = _common(body, nvext, max_tokens, logprobs)
    if nvext.artifact:
        check_artifact_request(params.stop, n, faults)
    _check_diverse(body, n)
    _engine_checks(body, "chat", model, served, engine)
    _check_context(prompt, max_tokens)
    return GenerationRequest(
        endpoint="chat",
        model=model,
        prompt_ids=tuple(prompt),
        n=n,
        params=params,
        logprobs=logprobs,
        prompt_logprobs=prompt_logprobs,
        stream=stream,
        include_usage=include_usage,
        nvext=nvext,
        tokens_as_ids=bool(_opt_bool(body, "return_tokens_as_token_ids")),
    )


def _engine_checks(
    body: Mapping[str, Any],
    endpoint: Endpoint,
    model: str | None,
    served: str | None,
    engine: str,
) -> None:
    """The model looked up (an unknown one is a 404), then what the engine refuses."""
    if served is not None:
        ensure_served_model(model, served)
    refused = engine_refusal(body, endpoint, engine)
    if refused is not None:
        raise refused


def _best_of(body: Mapping[str, Any]) -> int:
    value = body.get("best_of")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def ensure_served_model(request_model: str | None, served: str) -> None:
    """404 ``Model not found`` for any model but the served one (omitted: SGLang's native route,
    which names none; the OpenAI routes refuse an omitted model before, as a deserialize 400)."""
    if request_model is not None and request_model != served:
        raise FrontendError(404, "Model not found")
